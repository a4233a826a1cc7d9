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
import importlib.util
import os
import sys

import click

from a0py import __version__

# command -> (module under a0py.cli, name of the click command in it, the extra
# it needs beyond the core dependencies or None)
COMMANDS = {
    "ls": ("topics", "ls", None),
    "echo": ("echo", "echo", None),
    "pub": ("pub", "pub", None),
    "hz": ("rates", "hz", None),
    "bw": ("rates", "bw", None),
    # info and rm take a TOPIC, or --shm/--file for one raw arena (arenas.info/rm)
    "info": ("topics", "info", None),
    "rpc": ("rpc", "rpc", None),
    "cfg": ("cfg", "cfg", None),
    "log": ("log", "log", None),
    "rm": ("topics", "rm", None),
    # ls, echo, pub, hz, bw, info under ROS 2's names: a0py topic list, ...
    "topic": ("topics", "topic_group", None),
    "dump": ("arenas", "dump", None),
    "write": ("arenas", "write", None),
    "tail": ("arenas", "tail", None),
    "record": ("recordings", "record", "record"),
    "play": ("recordings", "play", "record"),
    "bag": ("recordings", "bag", "record"),
    "broker": ("broker", "broker", None),
    "claim": ("broker", "claim", None),
    "retract": ("broker", "retract", None),
    "subscribe": ("broker", "subscribe", None),
    "facts": ("broker", "facts", None),
    # Live topics need nothing more; a recording needs the view extra, which
    # the view says itself when asked to open one.
    "view": ("view", "view", None),
    "bridge": ("bridge", "bridge", "bridge"),
    "doctor": ("doctor", "doctor", None),
    "completion": ("completion", "completion", None),
    "ros2": ("ros2", "ros2", "ros2"),
}

# extra -> the top-level modules its commands import (lazily, deep inside:
# hence looked for before the command's module is loaded, not by catching an
# ImportError half-way through a recording).
EXTRA_MODULES = {
    "record": ("numpy", "mcap", "zstandard", "lz4", "pyarrow"),
    "bridge": ("zenoh",),
    "ros2": ("rclpy", "rosbags"),
}


def missing_modules(extra):
    """The modules of ``extra`` (see :data:`EXTRA_MODULES`) that are not
    installed, found without importing any of them."""
    return [m for m in EXTRA_MODULES.get(extra, ()) if importlib.util.find_spec(m) is None]


def pip_line(extra):
    """What to run to install ``extra``."""
    return f"pip install 'a0py[{extra}]'"


class _CommandTable(click.Group):
    """A click group whose commands are loaded from :data:`COMMANDS` on use."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attribute, extra = COMMANDS[name]
        missing = missing_modules(extra)
        if missing:
            return _unavailable(name, f"needs {', '.join(missing)}, not installed here", extra, missing)
        try:
            return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        except ImportError as e:  # a group's dependency is missing: the others still work
            unbuilt = _unbuilt_checkout()
            if unbuilt:
                return _unavailable(name, unbuilt, None, e,
                                    todo="python setup.py build_ext --inplace (make build) in that "
                                         "checkout, or run a0py from another directory so that the "
                                         "installed a0py is the one imported")
            return _unavailable(name, f"cannot load ({e})", extra, e)


def _unbuilt_checkout():
    """What is wrong when the a0py being imported has no compiled core (a source
    checkout on sys.path, not built in place: usually the current directory, or
    PYTHONPATH, shadowing the installed a0py), else None."""
    if importlib.util.find_spec("a0py._core") is not None:
        return None
    where = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (f"cannot load: the a0py imported here, from {where}, has no compiled modules (a source "
            "checkout that was not built in place, found before the installed a0py because it is "
            "the current directory or on PYTHONPATH)")


def _unavailable(name, why, extra, reason, todo=None):
    """A stand-in for a command that cannot run here: listed in --help as
    unavailable with the pip line of its extra (else the short ``reason``),
    and one error line saying so when run (``why`` completes "it ...", `todo`
    what to run, by default the extra's pip line)."""
    from a0py.cli.errors import CliError

    if todo is None:
        todo = pip_line(extra) if extra else "install what it needs (see docs/cli.md)"

    def fail(args):
        raise CliError(f"`a0py {name}` is unavailable: it {why}; run: {todo}")

    return click.Command(name, callback=fail,
                         short_help=f"(unavailable: {pip_line(extra) if extra else reason})",
                         help=f"Unavailable: this command {why}.\n\n\b\nRun: {todo}",
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
    from a0py.cli.errors import run_command

    try:
        status = run_command(cli, argv, prog_name)
        sys.stdout.flush()
    except ImportError as e:
        # An unbuilt checkout shadowing the installed a0py fails wherever the
        # compiled core is first imported (a command's options convert through
        # a0py.proto too), not only where get_command() loads a command.
        unbuilt = _unbuilt_checkout()
        if unbuilt is None:
            raise
        click.echo(f"a0py: error: {unbuilt} ({e}); run python setup.py build_ext --inplace "
                   "(make build) in that checkout, or run a0py from another directory so that "
                   "the installed a0py is the one imported", err=True)
        return 1
    except BrokenPipeError:
        # The reader of our output went away (`a0py dump ... | head`): stop
        # quietly, and keep the interpreter's final flush from complaining.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status
