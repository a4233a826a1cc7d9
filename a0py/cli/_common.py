"""What every command group shares: the arena
options (``--shm NAME | --file PATH``), topic names and ``--root``, the
parameter types of :mod:`a0py.cli.types` (sizes with units, finite seconds and
rates, bounded integers and counts, roots), and the mapping of a0py's exceptions to messages that name the
arena or topic and say what to do.

Invariant: a command never lets an :class:`a0py.A0Error` reach the user as a
traceback; it leaves through :func:`errors_about` (arenas) or
:func:`errors_about_topic` (topics), which turn it into a :class:`CliError`
(``a0py/cli/errors.py``: one line on stderr, exit status 1).
"""

import contextlib
import functools
import json
import shlex
import time
import warnings
from dataclasses import dataclass

import click

from a0py.cli.types import (  # noqa: F401  (the types every command uses, re-exported)
    MAX_SECONDS,
    RATE,
    SECONDS,
    BoundedInt,
    ByteSize,
    CheckedValue,
    Count,
    FiniteFloat,
    RootSpec,
)
from a0py.errors import (
    A0Error,
    A0TimeoutError,
    ArenaCorruptError,
    ArenaExistsError,
    ArenaFormatError,
    ArenaNotFoundError,
    ArenaPermissionError,
    FrameTooLargeError,
    PacketCorruptError,
)

from .errors import CliError


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


def _error_text(error):
    """An a0py error's message, less advice that names a Python argument the
    command line has no option for (``pass owner=1000``)."""
    if isinstance(error, ArenaPermissionError):
        return error.reason
    return str(error)


def create_hint(target):
    return f"create it with `a0py write {target.flag} --size BYTES DATA`"


def _hint(error, target):
    """What to do about an a0py error met on ``target``."""
    if isinstance(error, ArenaExistsError):
        return f"leave out --size to use it as it is, or remove it first with `a0py rm {target.flag}`"
    if isinstance(error, ArenaPermissionError):
        return f"`a0py rm --force {target.flag}` removes it"
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
        message = _error_text(error)
        name = target.shm.lstrip("/") if target.shm is not None else target.path
        if name not in message:
            message = f"{target.label}: {message}"
        hint = _hint(error, target)
        raise CliError(f"{message}; {hint}" if hint else message) from None


# -- topics


class TopicName(CheckedValue):
    """A topic name, checked (and a leading ``/`` dropped) as a0py.Topic does;
    a bad one is a usage error naming what is wrong."""

    name = "TOPIC"

    def check(self, value):
        from a0py.proto.topic import check_topic_name

        return check_topic_name(value)

    def shell_complete(self, ctx, param, incomplete):
        """The topics under the command's root (``--root`` if already given, else
        ``A0PY_ROOT``) that start with ``incomplete``; a leading ``/`` (ROS style,
        ``/ch<TAB>``) is kept in what is offered."""
        from click.shell_completion import CompletionItem

        from a0py.proto.topic import Root, list_topics

        root = ctx.params.get("root") if ctx is not None else None
        try:
            topics = list_topics(root if isinstance(root, Root) else None)
        except (A0Error, OSError):  # a bad root completes nothing rather than a traceback
            return []
        slash = "/" if incomplete.startswith("/") else ""
        stem = incomplete[len(slash):]
        return [CompletionItem(slash + t) for t in topics if t.startswith(stem)]


TOPIC = TopicName()

PUBSUB = "pubsub"
# --init of the commands that read a topic from a point in it (echo, log):
# the choice -> the init the subscriber takes.
INITS = {"oldest": "oldest", "recent": "most_recent", "new": "await_new"}

root_option = click.option(
    "--root", type=RootSpec(), default=None, envvar="A0PY_ROOT", show_envvar=True,
    help="Where the topics live: shm:PREFIX (shared memory, default shm:a0py) or a directory.")


@dataclass(frozen=True)
class TopicTarget:
    """A topic a command works on, with its root, as messages name it."""

    name: str
    root: object = None  # a0py.proto.topic.Root; None for A0PY_ROOT

    def topic(self, size=None):
        """The :class:`a0py.Topic` (``size``: the size its arenas get if this
        process creates them)."""
        from a0py.proto.topic import Topic

        return Topic(self.name, root=self.root, size=size)

    @property
    def label(self):
        """How messages name it: ``topic 'camera'``."""
        return f"topic '{self.name}'"

    @property
    def where(self):
        """Its root, for messages about where it is (or is not): ``under shm:a0py``."""
        from a0py.proto.topic import Root

        return f"under {(self.root or Root.parse(None)).spec()}"

    @property
    def rm_command(self):
        """The command that removes it, shell-quoted."""
        from a0py.proto.topic import Root

        root = "" if self.root is None or self.root == Root.parse(None) else f" --root {shlex.quote(self.root.spec())}"
        return f"a0py rm {shlex.quote(self.name)}{root}"


def _topic_hint(error, target, protocol):
    if isinstance(error, ArenaPermissionError):
        return f"`{target.rm_command}` removes the topic's arenas"
    if isinstance(error, FrameTooLargeError):
        return (f"its {protocol} arena is too small for this packet: remove the topic with "
                f"`{target.rm_command}` and create it again larger (`a0py pub --size BYTES ...`, "
                "or A0PY_TOPIC_SIZES / A0PY_ARENA_SIZE in the publishing program)")
    if isinstance(error, ArenaFormatError):
        return (f"its {protocol} arena is not an a0py arena of this version; remove the topic "
                f"with `{target.rm_command}` if nothing else uses it")
    if isinstance(error, (ArenaCorruptError, PacketCorruptError)):
        return f"remove the topic with `{target.rm_command}` and start its programs again"
    return None


@contextlib.contextmanager
def errors_about_topic(target, protocol=PUBSUB, *, timeout_hint=None):
    """Turn the a0py errors raised inside the block into :class:`CliError`
    naming the topic ``target`` (:class:`TopicTarget`), with a hint of what to
    do. ``timeout_hint`` is the hint for an :class:`a0py.A0TimeoutError`."""
    try:
        yield
    except A0TimeoutError as error:
        message = _with_label(str(error), target)
        raise CliError(f"{message}; {timeout_hint}" if timeout_hint else message) from None
    except A0Error as error:
        message = _with_label(_error_text(error), target)
        hint = _topic_hint(error, target, protocol)
        raise CliError(f"{message}; {hint}" if hint else message) from None


def _with_label(message, target):
    if f"'{target.name}'" in message:
        return message
    return f"{target.label}: {message}"


@contextlib.contextmanager
def size_warnings_on_stderr():
    """Show a publisher's TopicSizeWarning as ``a0py: warning: ...`` (once),
    not as Python's ``file:line: TopicSizeWarning`` with a source line."""
    from a0py.proto.pubsub import TopicSizeWarning

    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, TopicSizeWarning):
                click.echo(f"a0py: warning: {message}", err=True)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


# How often a command waiting for a topic's arena to appear looks again (s).
APPEAR_POLL_S = 0.05


def wait_for_topic(target, protocol, timeout, waiting_for):
    """Wait until ``target``'s ``protocol`` arena exists, without creating it
    (saying once on stderr that it waits for ``waiting_for``); False if
    ``timeout`` seconds (None: no limit) pass first.

    Commands that read never create a topic: the creator fixes the arena's
    size, and the program that writes the topic knows the size it needs."""
    topic = target.topic()
    if topic.exists(protocol):
        return True
    from a0py.proto.topic import PROTOCOLS

    if any(map(topic.exists, PROTOCOLS)):
        what = f"has no {protocol} arena yet"
    else:
        what = f"does not exist yet ({target.where})"
    click.echo(f"a0py: {target.label} {what}; waiting for {waiting_for} (Ctrl-C to stop)", err=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not topic.exists(protocol):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(APPEAR_POLL_S)
    return True


@dataclass(frozen=True)
class CountedReads:
    """What a command that reads a topic as it is written (``echo``, ``log``,
    ``cfg watch``) was asked for: ``count`` items (None: until Ctrl-C), each
    within ``timeout`` seconds (None: no limit). When nothing comes in time, a
    command that asked for a count fails naming what it got; one that did not
    ends quietly."""

    target: TopicTarget
    count: int | None
    timeout: float | None

    def topic_appears(self, protocol, waiting_for, failure):
        """:func:`wait_for_topic`; False when it gave up, or :class:`CliError`
        ``failure`` when a count was asked for."""
        if wait_for_topic(self.target, protocol, self.timeout, waiting_for):
            return True
        if self.count is not None:
            raise CliError(failure)
        return False

    def items(self, receive, silence, what, hint=""):
        """Yield what ``receive(timeout)`` returns, up to the count; ``receive``
        raises ``silence`` when nothing came within the timeout, which ends it
        (or fails: "no ``what`` within ... (got G of N)``hint``")."""
        got = 0
        while self.count is None or got < self.count:
            try:
                item = receive(self.timeout)
            except silence:
                if self.count is not None:
                    raise CliError(f"{self.target.label}: no {what} within {self.timeout} s "
                                   f"(got {got} of {self.count}){hint}") from None
                return
            got += 1
            yield item


@dataclass(frozen=True)
class PacketFormat:
    """How a command prints packets (``--json``, ``--hex``, ``--raw``, ``-v``)."""

    json: bool = False
    hex: bool = False
    raw: bool = False
    verbose: bool = False


def packet_format_options(command):
    """Add ``--json | --hex | --raw`` and ``-v`` to a command that prints
    packets; it receives them as one ``fmt`` (:class:`PacketFormat`)."""

    @click.option("-v", "--verbose", is_flag=True, help="Show each packet's seq, id and headers too.")
    @click.option("--raw", is_flag=True, help="Write payloads' bytes as they are, nothing between them.")
    @click.option("--hex", "as_hex", is_flag=True, help="Show payloads as hex.")
    @click.option("--json", "as_json", is_flag=True, help="Decode payloads as JSON (one line each).")
    @functools.wraps(command)
    def with_format(*args, as_json, as_hex, raw, verbose, **kwargs):
        if as_json + as_hex + raw > 1:
            raise click.UsageError("choose one of --json, --hex and --raw")
        if raw and verbose:
            raise click.UsageError("--raw writes payloads only: leave out -v")
        return command(*args, fmt=PacketFormat(as_json, as_hex, raw, verbose), **kwargs)

    return with_format


def parse_header(item):
    """``-H KEY=VALUE`` as a (key, value) pair; a usage error if it is not one
    or uses the prefix ``a0_`` (a0py's own headers: standard and protocol)."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{item!r}: give KEY=VALUE, such as -H unit=mm", param_hint="'-H'")
    if key.startswith("a0_"):
        raise click.BadParameter(f"{key!r}: headers starting with 'a0_' are a0py's own and cannot be set",
                                 param_hint="'-H'")
    return key, value


def prepare_payload(raw, where, as_hex, as_json):
    """The payload to publish from DATA's bytes; click.BadParameter naming
    ``where`` if they are not the hex or JSON asked for."""
    if as_hex:
        try:
            raw = bytes.fromhex(raw.decode("ascii", "replace"))
        except ValueError:
            raise click.BadParameter(f"{where} is not hex: give pairs of hex digits, such as 00ff10",
                                     param_hint="DATA") from None
    if as_json:
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise click.BadParameter(f"{where} is not JSON: {e}", param_hint="DATA") from None
        raw = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return raw
