"""Commands on one arena, named by ``--shm NAME`` or ``--file PATH``:
``info``, ``dump``, ``write``, ``tail`` and ``rm``."""

import os
import sys

import click

from a0py.cli._common import SECONDS, ByteSize, CliError, Count, arena_options, errors_about
from a0py.cli._output import frame_line, print_fields
from a0py.errors import (
    ArenaCorruptError,
    ArenaFormatError,
    ArenaNotFoundError,
    ArenaPermissionError,
)

_HEX = click.option("--hex", "as_hex", is_flag=True, help="Show frame data as hex.")


@click.command()
@arena_options
def info(target):
    """Show an arena's header and ring state."""
    from a0py import Transport

    with errors_about(target), target.open() as arena:
        header = arena.header()
        with Transport(arena).lock() as t:
            low, high, empty = t.seq_low, t.seq_high, t.empty
            used, high_water = t.used_space, t.high_water_mark
        if empty:
            frames = f"none (empty; the next frame gets seq {high + 1})"
        else:
            frames = f"seq {low}..{high} ({high - low + 1} live)"
        owner = header["deadman_pid"]
        print_fields([
            ("arena", f"{arena.kind} {arena.name}"),
            ("size", f"{arena.size} bytes (mode {oct(arena.mode or 0)})"),
            ("format", f"version {header['version']}, header {header['header_size']} bytes"),
            ("frames", frames),
            ("used", f"{used} bytes, high water {high_water} bytes"),
            ("notify", f"{header['notify']} (waiters {header['waiters']}, lock recoveries {header['recoveries']})"),
            ("deadman", f"pid {owner}" if owner else "free"),
        ])


@click.command()
@arena_options
@click.option("-n", "count", type=Count(min=0), default=None, metavar="N",
              help="Print at most N frames (the oldest N).")
@_HEX
def dump(target, count, as_hex):
    """Print the frames of an arena, oldest first: seq, size, data."""
    from a0py import Transport

    with errors_about(target), target.open() as arena:
        frames = Transport(arena).read_many(count)
    if not frames and count != 0:
        click.echo(f"a0py: {target.label} is empty", err=True)
    for seq, data in frames:
        click.echo(frame_line(seq, data, as_hex))


def _frames_from_arguments(items, as_hex):
    """The bytes of each DATA argument; ``-`` is all of standard input."""
    if list(items).count("-") > 1:
        raise click.BadParameter("'-' (standard input) can be given once", param_hint="DATA")
    frames = []
    for item in items:
        raw = sys.stdin.buffer.read() if item == "-" else item
        if not as_hex:
            frames.append(raw if isinstance(raw, bytes) else os.fsencode(raw))
            continue
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
        try:
            frames.append(bytes.fromhex(text))
        except ValueError:
            shown = "standard input" if item == "-" else repr(item)
            raise click.BadParameter(
                f"{shown} is not hex: with --hex give pairs of hex digits, such as 00ff10 or '00 ff 10'",
                param_hint="DATA",
            ) from None
    return frames


@click.command()
@arena_options
@click.option("--size", type=ByteSize(), default=None,
              help="Create the arena with this size if it does not exist (bytes, or 64K, 16M, 1G).")
@click.option("--hex", "as_hex", is_flag=True, help="Each DATA is hex digits (00ff10), not text.")
@click.argument("data", nargs=-1, required=True)
def write(target, size, as_hex, data):
    """Append one frame per DATA and print the seq of each.

    DATA is text (written as its UTF-8 bytes), hex digits with --hex, or -
    for all of standard input as one frame.
    """
    from a0py import Transport

    frames = _frames_from_arguments(data, as_hex)
    if size is None:
        missing = f"add --size BYTES to create it (for example `a0py write {target.flag} --size 1M ...`)"
    elif target.path is not None:  # creating, yet missing: the file's directory is
        missing = f"cannot create it: is there a directory {os.path.dirname(os.path.abspath(target.path))!r}?"
    else:
        missing = None
    with errors_about(target, missing_hint=missing), target.open(size) as arena:
        transport = Transport(arena)
        for frame in frames:
            click.echo(transport.write(frame))


@click.command()
@arena_options
@click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS without a new frame (default: run until Ctrl-C).")
@_HEX
def tail(target, timeout, as_hex):
    """Print new frames as they arrive (frames already there are skipped)."""
    from a0py import Transport

    with errors_about(target), target.open() as arena:
        transport = Transport(arena)
        with transport.lock() as t:
            if not t.empty:
                t.jump_tail()
        try:
            while (got := transport.read_next(timeout=timeout)) is not None:
                click.echo(frame_line(*got, as_hex))  # click.echo flushes
        except KeyboardInterrupt:
            pass


@click.command()
@arena_options
@click.option("-f", "--force", is_flag=True,
              help="No error if it does not exist; remove it even if it is not an a0py arena.")
def rm(target, force):
    """Remove an arena (its /dev/shm object or its file).

    Processes that have it open keep using it until they close it; later
    opens by name no longer find it. Refuses to remove what is not an a0py
    arena, unless --force.
    """
    with errors_about(target, missing_hint="nothing to remove"):
        try:
            arena = target.open()
        except ArenaNotFoundError:
            if force:
                return
            raise
        except (ArenaFormatError, ArenaCorruptError, ArenaPermissionError) as e:
            if not force:
                raise CliError(
                    f"{e}; not removed: `a0py rm --force {target.flag}` removes it anyway"
                ) from None
            _force_remove(target)
            return
        with arena:
            arena.unlink()


def _force_remove(target):
    """Remove the name whatever it holds (``rm --force``)."""
    import posix_ipc

    try:
        if target.shm is not None:
            posix_ipc.unlink_shared_memory("/" + target.shm.lstrip("/"))
        else:
            os.unlink(target.path)
    except (FileNotFoundError, posix_ipc.ExistentialError):
        pass
    except (OSError, posix_ipc.Error) as e:
        raise CliError(f"cannot remove {target.label}: {e}") from None
