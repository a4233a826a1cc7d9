"""Tab completion (click's): commands, options, and topic names from the root,
as the shells ask for them; ``a0py completion SHELL`` prints each shell's script."""

import pytest
from helpers.cli import a0


def _complete(words, env_root=None):
    """What bash completion offers for the command line ``words`` (the last word
    being completed), as click's bash_complete protocol answers it."""
    import subprocess

    from helpers.cli import SCRIPT, _env

    env = _env()
    env.update(COMP_WORDS=" ".join(words), COMP_CWORD=str(len(words) - 1),
               _A0PY_COMPLETE="bash_complete")
    if env_root:
        env["A0PY_ROOT"] = env_root
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines() if line]


@pytest.fixture
def topics(root):
    import a0py

    for name in ("chatter", "chassis/imu", "robot/camera"):
        a0py.Publisher(name).pub(b"x")
    return root


def test_topic_names_complete_from_the_root(topics):
    assert sorted(_complete(["a0py", "echo", "ch"])) == ["chassis/imu", "chatter"]
    assert _complete(["a0py", "hz", "robot/"]) == ["robot/camera"]


def test_a_leading_slash_completes_as_ros_users_type_it(topics):
    assert sorted(_complete(["a0py", "echo", "/ch"])) == ["/chassis/imu", "/chatter"]


def test_completion_follows_root_given_on_the_command_line(topics, tmp_path):
    # another root, given before the topic: its topics, not A0PY_ROOT's
    assert _complete(["a0py", "echo", "--root", str(tmp_path), "ch"]) == []
    assert sorted(_complete(["a0py", "echo", "--root", topics, "ch"])) == ["chassis/imu", "chatter"]


def test_commands_and_options_complete(root):
    assert "doctor" in _complete(["a0py", "do"])
    assert set(_complete(["a0py", "e"])) >= {"echo"}
    assert "--root" in _complete(["a0py", "echo", "--ro"])


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_each_shells_script(shell):
    result = a0("completion", shell)
    assert result.returncode == 0, result.err
    assert "_A0PY_COMPLETE" in result.out
    assert f"{shell}_complete" in result.out


def test_completion_refuses_an_unknown_shell():
    result = a0("completion", "tcsh")
    assert result.returncode == 2 and "tcsh" in result.err
