"""The ``a0py`` command line (also ``python -m a0py``). See docs/cli.md.

One module per command group; :data:`COMMANDS` says which module holds each
command, and a command's module is imported only when that command runs (or
``--help`` lists it), so a group with heavy or optional dependencies costs
the others nothing. To add a command group: write ``a0py/cli/<group>.py``
with its click commands (arena options, errors and output helpers are in
``_common`` and ``_output``) and add its commands to :data:`COMMANDS`.

Exit status: 0 on success (also a streaming command ended by Ctrl-C), 1 on
an error (one line on stderr that names the topic or arena and what to do),
2 on a usage error, 130 when interrupted.
"""

import importlib
import os
import sys

import click

from a0py import __version__

# command -> (module under a0py.cli, name of the click command in it)
COMMANDS = {
    "ls": ("topics", "ls"),
    "echo": ("topics", "echo"),
    "pub": ("topics", "pub"),
    "hz": ("topics", "hz"),
    "bw": ("topics", "bw"),
    # info and rm take a TOPIC, or --shm/--file for one raw arena (arenas.info/rm)
    "info": ("topics", "info"),
    "rpc": ("rpc", "rpc"),
    "cfg": ("cfg", "cfg"),
    "log": ("log", "log"),
    "rm": ("topics", "rm"),
    # ls, echo, pub, hz, bw, info under ROS 2's names: a0py topic list, ...
    "topic": ("topics", "topic_group"),
    "dump": ("arenas", "dump"),
    "write": ("arenas", "write"),
    "tail": ("arenas", "tail"),
    "record": ("recordings", "record"),
    "play": ("recordings", "play"),
    "bag": ("recordings", "bag"),
    "broker": ("broker", "broker"),
    "claim": ("broker", "claim"),
    "retract": ("broker", "retract"),
    "subscribe": ("broker", "subscribe"),
    "facts": ("broker", "facts"),
    "view": ("view", "view"),
}


class _CommandTable(click.Group):
    """A click group whose commands are loaded from :data:`COMMANDS` on use."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name]
        try:
            return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        except ImportError as e:  # a group's optional dependency is missing: the others still work
            return _unavailable(name, e)


def _unavailable(name, error):
    """A stand-in for a command whose module cannot be imported: listed in
    --help as unavailable, and an error saying why when run."""
    from a0py.cli._common import CliError

    def fail(args):
        raise CliError(f"`a0py {name}` is unavailable: {error}; install what it needs "
                       "(pip install 'a0py[...]', see docs/cli.md)")

    return click.Command(name, callback=fail, short_help=f"(unavailable: {error})",
                         params=[click.Argument(["args"], nargs=-1)],
                         context_settings={"ignore_unknown_options": True})


@click.group(cls=_CommandTable, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="a0py")
def cli():
    """Use a0py topics and arenas from the shell.

    Topic commands take a TOPIC name (under A0PY_ROOT, or --root); arena
    commands take --shm NAME (shared memory, as in /dev/shm) or --file PATH.
    Run `a0py COMMAND --help` for a command's options.
    """


def main(argv=None, prog_name="a0py"):
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return
    the exit status; errors are printed, never raised."""
    try:
        status = cli.main(args=argv, prog_name=prog_name, standalone_mode=False)
        sys.stdout.flush()
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.Abort:
        click.echo("a0py: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`a0py dump ... | head`): stop
        # quietly, and keep the interpreter's final flush from complaining.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status if isinstance(status, int) else 0
