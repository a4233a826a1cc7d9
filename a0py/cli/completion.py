"""``a0py completion SHELL``: the script that turns on tab completion of
commands, options and topic names (click's shell completion), to be
evaluated by the shell's start-up file. docs/cli.md says where each goes."""

import click

_SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(_SHELLS))
def completion(shell):
    """Print the completion script for SHELL (bash, zsh or fish).

    \b
    bash:  eval "$(a0py completion bash)"          in ~/.bashrc
    zsh:   eval "$(a0py completion zsh)"           in ~/.zshrc
    fish:  a0py completion fish > ~/.config/fish/completions/a0py.fish

    Then `a0py echo /ch<TAB>` completes the topics under the root."""
    from click.shell_completion import get_completion_class

    program = click.get_current_context().find_root().command  # the whole a0py command table
    script = get_completion_class(shell)(program, {}, "a0py", "_A0PY_COMPLETE").source()
    click.echo(script, nl=False)
