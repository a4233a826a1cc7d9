"""The ``a0py`` command line (also ``python -m a0py``). See docs/cli.md.

One module per command group; :data:`COMMANDS` says which module holds each
command, and a command's module is imported only when that command runs (or
``--help`` lists it), so a group with heavy or optional dependencies costs
the others nothing. To add a command group: write ``a0py/cli/<group>.py``
with its click commands (arena options, errors and output helpers are in
``_common`` and ``_output``) and add its commands to :data:`COMMANDS`.

Exit status: 0 on success, 1 on an error (one line on stderr that names the
arena and what to do), 2 on a usage error, 130 when interrupted.
"""

import importlib
import os
import sys

import click

from a0py import __version__

# command -> (module under a0py.cli, name of the click command in it)
COMMANDS = {
    "info": ("arenas", "info"),
    "dump": ("arenas", "dump"),
    "write": ("arenas", "write"),
    "tail": ("arenas", "tail"),
    "rm": ("arenas", "rm"),
}


class _CommandTable(click.Group):
    """A click group whose commands are loaded from :data:`COMMANDS` on use."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


@click.group(cls=_CommandTable, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="a0py")
def cli():
    """Look inside a0py arenas and use them from the shell.

    Name the arena with --shm NAME (shared memory, as in /dev/shm) or
    --file PATH. Run `a0py COMMAND --help` for a command's options.
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
