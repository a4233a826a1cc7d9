"""Printing for the commands: rich tables on a terminal, plain aligned text
when the output goes to a pipe or a file (no colour codes, no wrapping, no
trailing blanks), so scripts and ``grep`` read the same fields a person sees."""

import contextlib
import json
import logging
import signal
import sys
import threading
import time

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


_CONTROL_ESCAPES_BUT_LINES = {c: e for c, e in _CONTROL_ESCAPES.items() if chr(c) not in "\n\t"}


def escape_text(data, keep_lines=False):
    """Bytes (or str) as one line of text: undecodable bytes and control
    characters escaped (``\\xff``, ``\\n``); with ``keep_lines``, newlines and
    tabs are kept (text that is meant to span lines, such as a traceback)."""
    if not isinstance(data, str):
        data = bytes(data).decode("utf-8", "backslashreplace")
    return data.translate(_CONTROL_ESCAPES_BUT_LINES if keep_lines else _CONTROL_ESCAPES)


def wall_time(wall_ns):
    """A packet's ``a0_time_wall`` (ns since the epoch) as local time with ms."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall_ns / 1e9))
    return f"{stamp}.{int(wall_ns % 1_000_000_000) // 1_000_000:03d}"


def payload_text(pkt, as_json=False, as_hex=False):
    """A packet's payload as one line: text (escaped), hex, or its JSON
    re-encoded on one line. ValueError if ``as_json`` and it is not JSON."""
    if as_hex:
        return bytes(pkt.payload).hex(" ")
    if as_json:
        return json.dumps(pkt.json(), ensure_ascii=False)
    return escape_text(pkt.payload)


def typed_text(pkt, label):
    """A typed packet's message as one line (None for a packet without a schema, or
    one a0py does not decode): JSON messages as JSON, protobuf messages as JSON of
    their fields (long bytes as ``"<N bytes>"``), arrays and images summed up. A
    payload that does not decode is said on stderr and shown as text."""
    schema = getattr(pkt, "schema", None)
    if schema is None or schema.encoding not in ("jsonschema", "protobuf"):
        return None
    from a0py.proto import arrays, protobuf_types
    from a0py.proto.errors import DecodeError, ExtraNotInstalledError

    try:
        if schema.name == "a0py.NDArray":
            return _array_text(pkt.array())
        value = pkt.decode()
        if schema.encoding == "jsonschema":
            return json.dumps(value, ensure_ascii=False)
        fields = protobuf_types.message_fields(value)
        if schema.name == arrays.RAW_IMAGE_NAME:
            fields["data"] = f"<{len(value.data)} bytes: {value.width}x{value.height} {value.encoding}>"
        return json.dumps(fields, ensure_ascii=False, default=str)
    except (DecodeError, ExtraNotInstalledError) as e:
        click.echo(f"a0py: {label}: {e}; shown as text", err=True)
        return None


def _array_text(array):
    import numpy as np

    body = np.array2string(array, threshold=16, edgeitems=2, max_line_width=10**6)
    return f"{array.dtype} {tuple(array.shape)} " + " ".join(body.split())


def print_packet(pkt, body):
    """A packet as a block (``echo -v``): seq, id, headers (the wall time
    also as local time), the payload shown as ``body``, then ``---``."""
    from a0py.proto.packets import TIME_WALL  # the protocols load with the first packet

    click.echo(f"seq: {pkt.seq}")
    click.echo(f"id: {pkt.id}")
    click.echo("headers:")
    for key, value in pkt.headers.items():
        shown = escape_text(value)
        if key == TIME_WALL and value.isdigit():
            shown += f" ({wall_time(int(value))})"
        click.echo(f"  {escape_text(key)}: {shown}")
    click.echo(f"payload: {body}")
    click.echo("---")


def write_raw(data):
    """Bytes to standard output as they are (``--raw``)."""
    sys.stdout.buffer.write(bytes(data))
    sys.stdout.buffer.flush()


def preview(data, as_hex, width=64):
    """The first ``width`` bytes of a frame, as text (undecodable bytes and
    control characters escaped) or as hex, with an ellipsis when there is more."""
    chunk = bytes(data[:width])
    text = chunk.hex(" ") if as_hex else escape_text(chunk)
    return text + (" …" if len(data) > width else "")


def frame_line(seq, data, as_hex):
    """One frame as ``dump`` and ``tail`` print it: seq, size, preview."""
    line = f"{seq:>10}  {len(data):>8} B"
    return f"{line}  {preview(data, as_hex)}" if len(data) else line


def print_table(columns, rows, right=()):
    """Print rows under column titles: a rich table on a terminal, aligned
    plain columns otherwise (titles first). Columns named in ``right`` are
    right-aligned (numbers)."""
    rows = [[str(cell) for cell in row] for row in rows]
    if _to_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table(box=None, header_style="bold cyan", pad_edge=False)
        for title in columns:
            table.add_column(title, justify="right" if title in right else "left",
                             no_wrap=title == columns[0])
        for row in rows:
            table.add_row(*row)
        Console(highlight=False).print(table)
        return
    widths = [max([len(title)] + [len(row[i]) for row in rows]) for i, title in enumerate(columns)]
    for cells in [list(columns), *rows]:
        parts = [cell.rjust(w) if title in right else cell.ljust(w)
                 for cell, w, title in zip(cells, widths, columns)]
        click.echo("  ".join(parts).rstrip())


def human_bytes(n):
    """A byte count for people: ``512 B``, ``4 KiB``, ``1.5 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    if unit == "B":
        return f"{int(n)} B"
    return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.1f} {unit}"


def counted(n, noun):
    """``n`` and ``noun``, plural unless ``n`` is 1: ``1 packet``, ``3 packets``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def ago(wall_ns):
    """How long ago a wall-clock time (ns since the epoch) was: ``2.5 s ago``
    (a time in the future counts as now)."""
    return human_seconds(max(0.0, time.time() - wall_ns / 1e9)) + " ago"


def warn(message):
    """Say ``message`` on stderr as ``a0py: MESSAGE`` (a note, not an error)."""
    click.echo(f"a0py: {message}", err=True)


def human_seconds(seconds):
    """A duration for people: ``850 ms``, ``2.5 s``, ``3 min``, ``2.0 h``, ``4 d``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} d"


def show_packet(pkt, label, fmt):
    """Print a packet as ``echo`` does (and ``rpc`` its reply), in the
    format ``fmt`` (:class:`a0py.cli._common.PacketFormat`); a gap before it,
    and a payload that is not the JSON asked for, are said on stderr naming
    ``label`` (the topic)."""
    if pkt.missed:
        click.echo(f"a0py: {label}: {pkt.missed} packets missed before seq {pkt.seq} "
                   "(evicted before they were read)", err=True)
    if fmt.raw:
        write_raw(pkt.payload)
        return
    try:
        body = None if fmt.hex else typed_text(pkt, label)
        if body is None:
            body = payload_text(pkt, fmt.json, fmt.hex)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        click.echo(f"a0py: {label}: packet seq {pkt.seq} is not JSON ({e}); not shown "
                   "(leave out --json to see it)", err=True)
        return
    if fmt.verbose:
        print_packet(pkt, body)
    else:
        click.echo(body)


# -- long-running commands (a0py bridge, a0py ros2)


@contextlib.contextmanager
def logged_to_stderr(name, leave_out=None):
    """While the block runs, what logger `name` logs at INFO and above is shown on
    stderr as ``a0py MESSAGE``, but the records for which ``leave_out(record)`` is true."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("a0py %(message)s"))
    if leave_out is not None:
        handler.addFilter(lambda record: not leave_out(record))
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def stop_on_signals():
    """An Event set by SIGINT or SIGTERM (the handlers are this process's from now on)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def print_status_until(stop, status, interval):
    """Prints ``status()`` as one line of JSON every `interval` seconds when it changed,
    until `stop` (an Event) is set."""
    last = None
    while not stop.wait(interval):
        now = status()
        if now != last:
            click.echo(json.dumps(now, sort_keys=True))
            last = now
