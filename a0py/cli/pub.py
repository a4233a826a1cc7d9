"""``a0py pub TOPIC DATA``: publish text, hex, JSON or standard input to a
topic, once, N times or at a rate, as ``ros2 topic pub`` does.

Invariants: it creates the topic (``--size`` for the size), as
a0py.Publisher does, and only once it has a packet that fits: a bad DATA,
or one too large for the arena it would create, creates nothing. With
``--rate`` it is ended by Ctrl-C and exits 0.
"""

import sys
import time

import click

from a0py.cli._common import (
    PUBSUB,
    RATE,
    TOPIC,
    ByteSize,
    CliError,
    Count,
    TopicTarget,
    errors_about_topic,
    parse_header,
    prepare_payload,
    root_option,
    size_warnings_on_stderr,
)
from a0py.cli._output import human_bytes
from a0py.errors import ArgumentError


def _paced(payloads, rate):
    """``payloads`` (an iterable), the n-th no earlier than n / ``rate``
    seconds after the first (a schedule, so delays do not add up)."""
    start = time.monotonic()
    for n, payload in enumerate(payloads):
        if rate is not None and n:
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        yield payload


def _open_publisher(target, topic, packet_size):
    """The publisher of ``topic``, creating the topic only if a packet of
    ``packet_size`` bytes (headers included) fits the arena it would get:
    CliError (nothing created) if not."""
    from a0py import Publisher
    from a0py.proto.pubsub import packets_that_fit, size_for_packets
    from a0py.proto.sizes import size_text

    if not topic.exists(PUBSUB):
        size = topic.size_for(PUBSUB)
        if not packets_that_fit(size, packet_size):
            raise CliError(f"{target.label}: a packet of {packet_size} bytes (headers included) does not fit "
                           f"the {human_bytes(size)} pubsub arena this would create; nothing created: give "
                           f"--size {size_text(size_for_packets(packet_size))} (holds 8 of them)")
    return Publisher(topic)


@click.command()
@click.argument("topic", type=TOPIC)
@click.argument("data")
@root_option
@click.option("-r", "--rate", type=RATE, default=None, metavar="HZ",
              help="Publish HZ times a second (until --times or Ctrl-C).")
@click.option("-t", "--times", type=Count(), default=None, metavar="N",
              help="Publish N times (default 1, or until Ctrl-C with --rate).")
@click.option("--once", is_flag=True, help="Publish once and exit (--times 1).")
@click.option("--lines", is_flag=True,
              help="With DATA -: each line of standard input is one packet, published as it is read.")
@click.option("--json", "as_json", is_flag=True,
              help="DATA is JSON: checked, and sent with the header content-type: application/json.")
@click.option("--hex", "as_hex", is_flag=True, help="DATA is hex digits (00ff10), not text.")
@click.option("-H", "--header", "headers", multiple=True, metavar="KEY=VALUE",
              help="Add a header to each packet (repeatable).")
@click.option("--size", type=ByteSize(), default=None,
              help="The topic's arena size if this creates the topic (bytes, or 64K, 16M); default 4M.")
@click.option("-v", "--verbose", is_flag=True, help="Print the seq of each packet published.")
def pub(topic, data, root, rate, times, once, lines, as_json, as_hex, headers, size, verbose):
    """Publish DATA to a topic (creating the topic if it does not exist).

    DATA is text (sent as its UTF-8 bytes), hex digits with --hex, JSON with
    --json, or - for standard input (all of it as one packet, or each line
    as one with --lines). Without --rate or --times it publishes once.

    The topic is created with the first packet, and only if that packet fits
    it: a DATA too large for --size creates nothing. Packets that fit the
    topic only a few times get a warning naming the size to give it.
    """
    from a0py import Packet

    if as_json and as_hex:
        raise click.UsageError("choose one of --json and --hex")
    if lines and data != "-":
        raise click.UsageError("--lines reads standard input: give DATA as -")
    if once:
        if times not in (None, 1):
            raise click.UsageError("--once is --times 1: give one of them")
        if lines:
            raise click.UsageError("--once publishes DATA once: leave out --lines")
        times = 1
    if lines and times is not None:
        raise click.UsageError("--lines publishes each line once: leave out --times")
    extra = [parse_header(item) for item in headers]
    if as_json:
        extra.append(("content-type", "application/json"))
    target = TopicTarget(topic, root)
    try:
        topic = target.topic(size=size)
    except ArgumentError as e:  # the size (the name and root are checked already)
        raise click.BadParameter(str(e), param_hint="'--size'") from None
    if lines:
        def payloads():
            for number, line in enumerate(sys.stdin.buffer, 1):
                try:
                    yield prepare_payload(line.rstrip(b"\r\n"), f"line {number} of standard input", as_hex, as_json)
                except click.BadParameter as e:
                    raise CliError(f"{target.label}: {e.format_message()}; the {number - 1} lines "
                                   "before it were published") from None
    else:
        # Read and checked before the topic is touched: a bad DATA creates nothing.
        raw = sys.stdin.buffer.read() if data == "-" else data.encode("utf-8", "surrogateescape")
        one = prepare_payload(raw, "standard input" if data == "-" else repr(data), as_hex, as_json)
        count = times if times is not None or rate is not None else 1

        def payloads():
            n = 0
            while count is None or n < count:
                yield one
                n += 1
    publisher = None
    try:
        with errors_about_topic(target), size_warnings_on_stderr():
            for payload in _paced(payloads(), rate):
                if publisher is None:
                    # headers included: the fixed part, these headers, padding
                    size = len(Packet(extra, b"").to_bytes()) + len(payload)
                    publisher = _open_publisher(target, topic, size)
                seq = publisher.pub(payload, extra)
                if verbose:
                    click.echo(seq)
    except KeyboardInterrupt:
        pass
    finally:
        if publisher is not None:
            publisher.close()

