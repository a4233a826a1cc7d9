"""One version: `a0py --version`, the installed package's metadata and the
changelog's newest release all say what a0py/__init__.py says."""

import re
from importlib import metadata
from pathlib import Path

from helpers.cli import a0
from helpers.procs import REPO

import a0py


def test_the_command_prints_the_package_version():
    result = a0("--version")
    assert result.returncode == 0
    assert result.out.split()[-1] == a0py.__version__


def test_the_installed_metadata_has_the_same_version():
    assert metadata.version("a0py") == a0py.__version__


def test_the_changelog_starts_at_this_version():
    text = Path(REPO, "CHANGELOG.md").read_text()
    first = re.search(r"^## (\S+)", text, re.MULTILINE)
    assert first and first.group(1) == a0py.__version__
