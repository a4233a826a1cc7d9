"""The recording commands of the ``a0py`` command line: ``record``, ``play``
and the ``bag`` group (``bag info``), as click commands.

The ``a0py`` CLI registers them; ``python -m a0py.recording.cli`` runs them
alone. Errors leave as one line on stderr (``a0py: error: ...``), exit
status 1; a usage error exits 2; Ctrl-C closes what is open and exits 130.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import click

from ..errors import A0Error

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class RecordingCliError(click.ClickException):
    """An error the user can act on: ``a0py: error: MESSAGE``, exit status 1."""

    def show(self, file=None):
        click.echo(f"a0py: error: {self.format_message()}", err=True)


class _Size(click.ParamType):
    name = "SIZE"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        s = str(value).strip().lower().removesuffix("ib").removesuffix("b")
        unit = s[-1:] if s[-1:] in _SIZE_UNITS and s[-1:] else ""
        try:
            return int(float(s[: len(s) - len(unit)]) * _SIZE_UNITS[unit])
        except ValueError:
            self.fail(f"{value!r} is not a size (e.g. 1G, 512M, 4096)", param, ctx)


SIZE = _Size()


def _fail(e):
    raise RecordingCliError(str(e)) from None


def _split(values):
    out = []
    for v in values or ():
        out += [x for x in v.replace(",", " ").split() if x]
    return out


class _Signals:
    """SIGINT and SIGTERM call ``stop`` (the recorder or player then closes
    cleanly); restored on exit."""

    def __init__(self, stop):
        self.stop = stop
        self.hit = False
        self.saved = {}

    def _handler(self, signum, frame):
        self.hit = True
        self.stop()

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.saved[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, h in self.saved.items():
            signal.signal(sig, h)
        return False


def _progress_printer(enabled):
    if not enabled:
        return None

    def show(stats):
        parts = [f"{t}: {s.frames} frames {s.rate:,.0f}/s gaps {s.gaps}" for t, s in stats.items()]
        sys.stderr.write("\r\x1b[K" + " | ".join(parts)[:300])
        sys.stderr.flush()

    return show


@click.command("record")
@click.argument("topics", nargs=-1)
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False),
              help="Directory of the segments (PREFIX_NNNNN.mcap).")
@click.option("-a", "--all", "all_", is_flag=True, help="Record every topic, including new ones.")
@click.option("-e", "--regex", help="Record the topics whose name matches this regular expression.")
@click.option("--max-bytes", type=SIZE, help="Start a new segment after this size (e.g. 1G).")
@click.option("--max-duration", type=float, help="Start a new segment after this many seconds.")
@click.option("--compression", type=click.Choice(["zstd", "lz4", "none"]), default="zstd", show_default=True)
@click.option("--json", "json_", is_flag=True, help="Also write JSON payloads to /a0py/json/TOPIC channels (Foxglove).")
@click.option("--resume", is_flag=True, help="Continue the recording in --out after its last seq per topic.")
@click.option("--from-oldest", is_flag=True, help="Also record the frames the topics already hold.")
@click.option("--duration", type=float, help="Stop after this many seconds.")
@click.option("--prefix", default="a0py", show_default=True, help="Segment file name prefix.")
@click.option("--progress/--no-progress", default=None, help="Show frames, rate and gaps per topic "
              "(default: when stderr is a terminal).")
def record(topics, out, all_, regex, max_bytes, max_duration, compression, json_, resume, from_oldest, duration,
           prefix, progress):
    """Record live TOPICS into MCAP segments in --out (Ctrl-C to stop).

    Frames evicted before they were read are recorded as gaps, never
    skipped silently. Open the segments with Spark
    (spark.read.format("a0").load(DIR)), Foxglove, or `a0py bag info`."""
    from .recorder import Recorder

    if progress is None:
        progress = sys.stderr.isatty()
    try:
        rec = Recorder(list(topics), out=out, all=all_, regex=regex, max_bytes=max_bytes,
                       max_duration=max_duration, compression=compression, json=json_, resume=resume,
                       init="oldest" if from_oldest else "new", prefix=prefix,
                       on_progress=_progress_printer(progress))
    except (A0Error, OSError) as e:
        _fail(e)
    with _Signals(rec.request_stop):
        rec.start()
        try:
            rec.wait_ready()
            click.echo(f"recording to {rec.out} (Ctrl-C to stop)", err=True)
            deadline = None if duration is None else time.monotonic() + duration
            while rec.running and (deadline is None or time.monotonic() < deadline):
                rec._thread.join(0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic())))
            stats = rec.stop()
        except (A0Error, OSError) as e:
            _fail(e)
    if progress:
        sys.stderr.write("\n")
    for path in rec.segments:
        click.echo(path)
    for t, s in stats.items():
        click.echo(f"{t}: {s.frames} frames, {s.bytes} bytes, {s.gaps} gaps ({s.lost} frames lost)")


@click.command("play")
@click.argument("path")
@click.option("-r", "--rate", type=float, default=1.0, show_default=True,
              help="Speed factor (2 = twice as fast, 0 = as fast as possible).")
@click.option("-l", "--loop", is_flag=True, help="Play again from the start at the end (Ctrl-C to stop).")
@click.option("--start-offset", type=float, default=0.0, help="Skip the first SECONDS of the recording.")
@click.option("--topics", multiple=True, help="Only these recorded topics (repeat, or separate with ',').")
@click.option("--remap", multiple=True, help="Publish recorded topic OLD as NEW (OLD:NEW; repeatable).")
def play(path, rate, loop, start_offset, topics, remap):
    """Publish the recording PATH (file, directory or glob) into live topics
    at its original timing. Replayed packets keep their ids, headers and
    payloads, and carry a0_replay_* headers."""
    from .player import Player

    try:
        player = Player(path, rate=rate, loop=loop, start_offset=start_offset,
                        topics=_split(topics) or None, remap=_split(remap))
    except (A0Error, OSError) as e:
        _fail(e)
    with player, _Signals(player.stop):
        try:
            stats = player.run()
        except (A0Error, OSError) as e:
            _fail(e)
    click.echo(f"published {stats.frames} frames ({stats.gaps} gaps skipped, {stats.loops} passes)")


@click.group("bag")
def bag():
    """Inspect recordings."""


@bag.command("info")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
def info(path, as_json):
    """Describe the recording PATH (file, directory or glob): topics, counts,
    time range, gaps, sizes."""
    from .baginfo import bag_info, format_bag_info

    try:
        facts = bag_info(path)
    except (A0Error, OSError) as e:
        _fail(e)
    click.echo(json.dumps(facts, indent=2) if as_json else format_bag_info(facts))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """a0py recordings: record, play, bag info."""


main.add_command(record)
main.add_command(play)
main.add_command(bag)


def run(argv=None):
    """Runs the commands on ``argv``; returns the exit status."""
    try:
        main.main(args=argv, prog_name="a0py", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.Abort:
        click.echo("a0py: interrupted", err=True)
        return 130
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(run())

