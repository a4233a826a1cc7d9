"""The recording commands of the ``a0py`` command line: ``record``, ``play``
and the ``bag`` group (``bag info``), on :mod:`a0py.recording`.

The ``a0py`` CLI registers them; ``python -m a0py.cli.recordings`` runs them
alone. Errors leave as one line on stderr (``a0py: error: ...``), exit
status 1; a bad value is a usage error, exit 2; Ctrl-C closes what is open
and exits 130.

Invariant: ``record`` reads and never creates a topic (see
:class:`a0py.recording.recorder.Recorder`): it says which topics it waits
for, and records each from its first packet once a publisher creates it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
import time

import click

from a0py.cli._common import (
    MAX_SECONDS,
    SECONDS,
    TOPIC,
    ByteSize,
    FiniteFloat,
    TopicTarget,
    root_option,
    size_warnings_on_stderr,
)
from a0py.cli.errors import CliError, run_command
from a0py.cli.types import MAX_RATE, unusable_directory
from a0py.errors import A0Error

# A segment smaller than this holds little more than the file's own records.
MIN_SEGMENT_BYTES = 4096


def _fail(e):
    raise CliError(str(e)) from None


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


def _regex(ctx, param, value):
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as e:
        raise click.BadParameter(f"{value!r} is not a regular expression: {e}") from None


def _segment_bytes(ctx, param, value):
    if value is not None and value < MIN_SEGMENT_BYTES:
        raise click.BadParameter(f"{value} bytes is too small a segment: give at least {MIN_SEGMENT_BYTES} (4K)")
    return value


def _remaps(ctx, param, values):
    from a0py.proto.topic import check_topic_name

    out = []
    for item in _split(values):
        old, sep, new = item.partition(":")
        if not sep:
            raise click.BadParameter(f"{item!r}: give OLD:NEW (the recorded name, a colon, the live name)")
        for name in (old, new):
            try:
                check_topic_name(name)
            except A0Error as e:
                raise click.BadParameter(f"{item!r}: {e}") from None
        out.append(item)
    return out


def _topic_list(ctx, param, values):
    return [TOPIC.convert(t, param, ctx) for t in _split(values)] or None


def _out_dir(ctx, param, value):
    problem = unusable_directory(value) if value is not None else None
    if problem:
        raise click.BadParameter(f"{value!r} {problem}: give a directory (it is made if missing)")
    return value


@click.command("record")
@click.argument("topics", nargs=-1, type=TOPIC)
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), callback=_out_dir,
              help="Directory of the segments (PREFIX_NNNNN.mcap).")
@click.option("-a", "--all", "all_", is_flag=True, help="Record every topic, including new ones.")
@click.option("-e", "--regex", callback=_regex,
              help="Record the topics whose name matches this regular expression.")
@root_option
@click.option("--max-bytes", type=ByteSize(), callback=_segment_bytes,
              help="Start a new segment once one holds this many bytes (64M, 1G). Chunks not yet "
                   "compressed count at their uncompressed size: a compressed segment ends below it.")
@click.option("--max-duration", type=FiniteFloat(0, MAX_SECONDS, min_open=True), metavar="SECONDS",
              help="Start a new segment after this many seconds, with the next frame (idle topics "
                   "start no empty segment).")
@click.option("--compression", type=click.Choice(["zstd", "lz4", "none"]), default="zstd", show_default=True)
@click.option("--json", "json_", is_flag=True, help="Also write JSON payloads to /a0py/json/TOPIC channels (Foxglove).")
@click.option("--resume", is_flag=True, help="Continue the recording in --out after its last seq per topic.")
@click.option("--from-oldest", is_flag=True, help="Also record the frames the topics already hold.")
@click.option("--duration", type=SECONDS, metavar="SECONDS", help="Stop after this many seconds.")
@click.option("--prefix", default="a0py", show_default=True, help="Segment file name prefix.")
@click.option("--progress/--no-progress", default=None, help="Show frames, rate and gaps per topic "
              "(default: when stderr is a terminal).")
def record(topics, out, all_, regex, root, max_bytes, max_duration, compression, json_, resume, from_oldest,
           duration, prefix, progress):
    """Record live TOPICS into MCAP segments in --out (Ctrl-C to stop).

    Never creates a topic: one that does not exist yet is waited for (it
    says so) and recorded from its first packet once a publisher creates
    it, at the size the publisher asks for. Frames evicted before they were
    read are recorded as gaps, never skipped silently. Open the segments
    with Spark (spark.read.format("a0").load(DIR)), Foxglove, or
    `a0py bag info`."""
    from a0py.recording.recorder import Recorder, existing_segments

    if not topics and not all_ and regex is None:
        raise click.UsageError("nothing to record: name TOPICS, or give --all or -e REGEX")
    if not resume and existing_segments(out):
        raise CliError(f"{os.path.abspath(out)} already holds recordings: give --resume to continue them, "
                       "or another --out directory")
    if progress is None:
        progress = sys.stderr.isatty()
    try:
        rec = Recorder(list(topics), out=out, all=all_, regex=regex, root=root, max_bytes=max_bytes,
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
            for name in rec.waiting_for():
                target = TopicTarget(name, root)
                click.echo(f"a0py: {target.label} does not exist yet ({target.where}); waiting for a publisher "
                           "to create it (recorded from its first packet)", err=True)
            if (all_ or regex is not None) and not rec.stats():
                click.echo("a0py: no topic to record yet; waiting for topics "
                           f"{'to appear' if regex is None else f'matching {regex.pattern!r}'}", err=True)
            deadline = None if duration is None else time.monotonic() + duration
            while rec.running and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic())))
            stats = rec.stop()
        except (A0Error, OSError) as e:
            _fail(e)
    if progress:
        sys.stderr.write("\n")
    for path in rec.segments:
        click.echo(path)
    for t, s in stats.items():
        click.echo(f"{t}: {s.frames} frames, {s.bytes} bytes, {s.gaps} gaps ({s.lost} frames lost)")
    for name in rec.waiting_for():
        click.echo(f"{name}: never appeared, nothing recorded")


@click.command("play")
@click.argument("path")
@click.option("-r", "--rate", type=FiniteFloat(0, MAX_RATE), default=1.0, show_default=True,
              help="Speed factor (2 = twice as fast, 0 = as fast as possible).")
@click.option("-l", "--loop", is_flag=True, help="Play again from the start at the end (Ctrl-C to stop).")
@click.option("--start-offset", type=SECONDS, default=0.0, metavar="SECONDS",
              help="Skip the first SECONDS of the recording.")
@click.option("--topics", multiple=True, callback=_topic_list,
              help="Only these recorded topics (repeat, or separate with ',').")
@click.option("--remap", multiple=True, callback=_remaps, metavar="OLD:NEW",
              help="Publish recorded topic OLD as NEW (repeatable).")
@click.option("--prefix", type=TOPIC, metavar="NAMESPACE",
              help="Publish every recorded topic not given by --remap under NAMESPACE/ (sim: imu -> sim/imu).")
@root_option
def play(path, rate, loop, start_offset, topics, remap, prefix, root):
    """Publish the recording PATH (file, directory, rosbag2 bag or glob) into
    live topics at its original timing. Replayed packets keep their ids,
    headers and payloads, and carry a0_replay_* headers. A channel a0py did
    not write (any MCAP file, a ROS 2 bag) plays into the topic named after
    its channel topic (/imu -> imu; characters a topic name cannot hold
    become _), its messages' bytes as payloads, with its schema where an
    a0py topic can carry it. A topic this creates is sized to hold several
    of its first recorded packet; a packet that fits a topic only a few
    times is warned about."""
    from a0py.recording.player import Player

    try:
        player = Player(path, rate=rate, loop=loop, start_offset=start_offset, topics=topics, remap=remap,
                        root=root, prefix=prefix)
        if topics:
            missing = sorted(set(topics) - player.recorded_topics())
            if missing:
                raise CliError(f"{path}: no topic {', '.join(map(repr, missing))} in the recording "
                               f"(`a0py bag info {shlex.quote(path)}` lists its topics)")
    except (A0Error, OSError) as e:
        _fail(e)
    for topic, why in sorted(player.stats.raw_topics.items()):
        click.echo(f"a0py: {player.live_name(topic)}: {why}", err=True)
    with player, _Signals(player.stop), size_warnings_on_stderr():
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
    """Describe the recording PATH (any MCAP file, a directory, a rosbag2 bag
    or a glob), as `ros2 bag info` does: files, size, duration, start, end,
    messages, compression, and every channel with its type, serialization
    format and count (one a0py reads only as bytes says so); for a0py's
    topics also their seqs and gaps."""
    from a0py.recording.baginfo import bag_info, format_bag_info

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
    return run_command(main, argv, "a0py")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(run())
