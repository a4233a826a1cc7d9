"""``a0py view``: the live web view (:mod:`a0py.view`) as a click command
(registered by the ``a0py`` command line; ``python -m a0py.cli.view`` runs it
alone).

Errors leave as one line on stderr (``a0py: error: ...``), exit status 1; a
usage error exits 2; Ctrl-C stops the server and exits 0.
"""

import os
import sys

import click

from a0py.cli.errors import CliError, run_command
from a0py.cli.types import BoundedInt, ByteSize, RootSpec
from a0py.errors import A0Error


@click.command("view", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("sources", nargs=-1, metavar="[TOPIC_GLOB...] | DIR | FILE.mcap")
@click.option("--port", "-p", type=BoundedInt(0, 65535), default=8765, show_default=True,
              help="Port of the page and of the WebSocket (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback also needs --allow-remote.")
@click.option("--allow-remote", is_flag=True,
              help="Allow binding a non-loopback --host; every connection then needs the printed token.")
@click.option("--allow-origin", "origins", multiple=True, metavar="ORIGIN",
              help="Also accept WebSocket connections from this browser origin (repeatable); the page "
                   "itself and https://app.foxglove.dev are accepted already.")
@click.option("--root", type=RootSpec(), default=None, envvar="A0PY_ROOT", show_envvar=True,
              help="Where the live topics are: shm:PREFIX (shared memory, default shm:a0py) or a "
                   "directory.")
@click.option("--queue", "queue_messages", type=BoundedInt(1, 1_000_000), default=10_000, show_default=True,
              help="Messages each client may have waiting before its oldest are dropped.")
@click.option("--queue-bytes", type=ByteSize(), default="8M", show_default=True,
              help="Bytes of messages each client may have waiting (its send budget): beyond it the "
                   "oldest messages of the topic holding the most bytes are dropped first.")
@click.option("--allow-publish", "allow_publish", multiple=True, metavar="GLOB",
              help="Let clients (the page, the Foxglove app) publish to the topics matching GLOB "
                   "(repeatable; off by default).")
@click.option("--allow-set", "allow_set", multiple=True, metavar="GLOB",
              help="Let clients set parameters (configuration values) of the cfg topics matching GLOB "
                   "(repeatable; off by default; reading them needs no flag).")
@click.option("--allow-call", "allow_call", multiple=True, metavar="GLOB",
              help="Let clients call the RPC servers of the topics matching GLOB (repeatable; off by "
                   "default; seeing the services needs no flag).")
@click.option("--call-timeout", type=click.FloatRange(0.001, 3600), default=5.0, show_default=True,
              help="Seconds a service call through the view waits for its reply.")
@click.option("--foxglove-sdk", "foxglove_sdk", is_flag=True,
              help="Also log the topics to the Foxglove SDK's own WebSocket server "
                   "(needs: pip install 'a0py[foxglove]').")
@click.option("--foxglove-port", type=BoundedInt(0, 65535), default=8766, show_default=True,
              help="Port of the Foxglove SDK's server (with --foxglove-sdk).")
def view(sources, port, host, allow_remote, origins, root, queue_messages, queue_bytes, allow_publish, allow_set,
         allow_call, call_timeout, foxglove_sdk, foxglove_port):
    """Serve a web page that shows live topics (or a recording).

    With TOPIC_GLOBs (default: every topic), the page lists the live topics
    with their rates, bandwidth and missed counts, shows the latest messages
    of the one you pick (JSON, text or hex, with headers) and plots numeric
    JSON fields. With a DIR or FILE.mcap, it plays the recording with a time
    slider. The same port speaks the Foxglove WebSocket protocol
    (foxglove.sdk.v1): the Foxglove app can open ws://HOST:PORT too.

    Clients only watch unless allowed more: --allow-publish, --allow-set and
    --allow-call open publishing, setting configuration values and calling
    RPC servers, each on the topics matching its globs (docs/security.md).
    """
    from a0py.view import DEFAULT_ORIGINS, foxglove_bridge, is_loopback, is_recording, serve

    if not allow_remote and not is_loopback(host):
        raise CliError(f"--host {host} would show your topics to other machines: keep the default "
                       "(127.0.0.1), or add --allow-remote, which prints an access token the page needs")
    recording = None
    globs = list(sources)
    if len(globs) == 1 and is_recording(globs[0]):
        recording, globs = os.path.expanduser(globs[0]), []
    elif any(is_recording(g) for g in globs):
        raise CliError("give either topic globs or one recording (a FILE.mcap or a DIR), not both")
    if recording and (allow_publish or allow_set or allow_call):
        raise CliError("--allow-publish, --allow-set and --allow-call apply to live topics, not to a recording")

    def ready(url):
        what = f"recording {recording}" if recording else (
            "topics " + " ".join(globs) if globs else "every topic")
        click.echo(f"a0py view: serving {what}")
        click.echo(f"a0py view: open {url}")
        ws = "ws" + url[4:]
        click.echo(f"a0py view: Foxglove WebSocket: {ws}")
        for doing, allowed in (("publish to", allow_publish), ("set parameters of", allow_set),
                               ("call the RPC servers of", allow_call)):
            if allowed:
                click.echo(f"a0py view: clients may {doing} {' '.join(allowed)}")
        sys.stdout.flush()

    sdk = None
    try:
        if foxglove_sdk:
            sdk = foxglove_bridge(host=host, port=foxglove_port, root=root, globs=globs or None,
                                 allow_remote=allow_remote)
            sdk.start()
            click.echo(f"a0py view: Foxglove SDK server on ws://{host}:{sdk.port}")
        serve(globs or None, host, port, recording=recording, root=root, allow_remote=allow_remote,
              allowed_origins=tuple(DEFAULT_ORIGINS) + tuple(origins), queue_messages=queue_messages,
              queue_bytes=queue_bytes, ready=ready, **({} if recording else {
                  "allow_publish": allow_publish, "allow_set": allow_set, "allow_call": allow_call,
                  "call_timeout": call_timeout}))
    except A0Error as e:
        raise CliError(str(e)) from None
    finally:
        if sdk is not None:
            sdk.close()


def main(argv=None):
    """Runs the command on ``argv``; returns the exit status (0 when Ctrl-C stops it)."""
    return run_command(view, argv, "a0py view", quiet_interrupt=True)


if __name__ == "__main__":
    sys.exit(main())
