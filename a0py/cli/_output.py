"""Printing for the commands: rich tables on a terminal, plain aligned text
when the output goes to a pipe or a file (no colour codes, no wrapping, no
trailing blanks), so scripts and ``grep`` read the same fields a person sees."""

import sys

import click


def _to_terminal():
    return sys.stdout.isatty()


def print_fields(rows):
    """Print ``(name, value)`` rows as an aligned two-column list."""
    rows = [(str(name), str(value)) for name, value in rows]
    if _to_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(overflow="fold")
        for name, value in rows:
            table.add_row(name, value)
        Console(highlight=False).print(table)
        return
    width = max((len(name) for name, _ in rows), default=0)
    for name, value in rows:
        click.echo(f"{name:<{width}}  {value}")


# Control characters are escaped (``\n``, ``\x1b``): a frame's bytes must not
# break the one-line-per-frame output or send escape sequences to a terminal.
_CONTROL_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(32), 127)}


def preview(data, as_hex, width=64):
    """The first ``width`` bytes of a frame, as text (undecodable bytes and
    control characters escaped) or as hex, with an ellipsis when there is more."""
    chunk = bytes(data[:width])
    if as_hex:
        text = chunk.hex(" ")
    else:
        text = chunk.decode("utf-8", "backslashreplace").translate(_CONTROL_ESCAPES)
    return text + (" …" if len(data) > width else "")


def frame_line(seq, data, as_hex):
    """One frame as ``dump`` and ``tail`` print it: seq, size, preview."""
    line = f"{seq:>10}  {len(data):>8} B"
    return f"{line}  {preview(data, as_hex)}" if len(data) else line
