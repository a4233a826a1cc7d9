"""``a0py rpc TOPIC DATA``: one request to a topic's RPC server, its reply
printed as ``echo`` prints packets (a0py.RpcClient, :mod:`a0py.proto.rpc`).

The command does not create the topic's rpc arena (its server does, at the
size it needs): it waits up to ``--wait-for-server`` for it to appear.
"""

import sys
import time

import click

from a0py.cli._common import (
    SECONDS,
    TOPIC,
    CliError,
    TopicTarget,
    errors_about_topic,
    packet_format_options,
    parse_header,
    prepare_payload,
    root_option,
    wait_for_topic,
)
from a0py.cli._output import show_packet

RPC = "rpc"


@click.command()
@click.argument("topic", type=TOPIC)
@click.argument("data")
@root_option
@click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
              help="Give up (and cancel the request) after SECONDS without a reply (default: wait "
                   "as long as the server lives).")
@click.option("--wait-for-server", type=SECONDS, default=10.0, show_default=True,
              metavar="SECONDS", help="Give up after SECONDS with no live server.")
@click.option("-H", "--header", "headers", multiple=True, metavar="KEY=VALUE",
              help="Add a header to the request (repeatable).")
@packet_format_options
def rpc(topic, data, root, timeout, wait_for_server, headers, fmt):
    """Send DATA to a topic's RPC server and print its reply.

    DATA is text (sent as its UTF-8 bytes), or - for all of standard input.
    With --json, DATA must be JSON (sent with the header content-type:
    application/json) and the reply is decoded as JSON; with --hex, DATA is
    hex digits and the reply is shown as hex. The reply is printed as `a0py
    echo` prints a packet. A request sent before the server starts is served
    when it starts (within --wait-for-server); Ctrl-C cancels the request.
    """
    from a0py import RpcClient

    extra = [parse_header(item) for item in headers]
    if fmt.json:
        extra.append(("content-type", "application/json"))
    raw = sys.stdin.buffer.read() if data == "-" else data.encode("utf-8", "surrogateescape")
    request = prepare_payload(raw, "standard input" if data == "-" else repr(data), fmt.hex, fmt.json)
    target = TopicTarget(topic, root)
    started = time.monotonic()
    if not wait_for_topic(target, RPC, wait_for_server, "its server to start"):
        raise CliError(f"{target.label}: no RPC server started within {wait_for_server} s (nothing "
                       f"created its rpc arena {target.where}): start the server, or check the name "
                       "with `a0py ls`")
    left = max(0.0, wait_for_server - (time.monotonic() - started))
    hint = (f"is its server running? `a0py info {target.name}` shows the processes that have the "
            "topic open")
    with errors_about_topic(target, RPC, timeout_hint=hint):
        client = RpcClient(target.topic(), wait_for_server=left)
        try:
            reply = client.send_blocking(request, timeout=timeout, headers=extra)
        finally:
            client.close()
    show_packet(reply, target.label, fmt)
