"""The tree holds no leftovers: no stray output committed at the root (a
``c2.err`` or ``c2.out`` from a debugging session), and no comment, docstring or
page naming a repository file that is no longer there (``a0py/spark/_read.py``
after the module was split, ``tests/test_x.py`` after the tests moved into
folders).

A path is a word starting with ``a0py/``, ``csrc/``, ``jvm/``, ``docs/``,
``tests/``, ``bench/`` or ``examples/``, or with a package of ``a0py`` as the
short form the sources use (``spark/planning.py``, ``binding/packet.pxi``),
and ending in a file name with a source or document extension. Words that only
look like paths (a key expression, an MCAP encoding such as ``a0py/packet``)
have no such extension and are not checked. Read from what git tracks; the
dated benchmark records in ``bench/results/`` and ``CHANGELOG.md`` are history
and name files as they were.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Files that belong at the root of the repository. A new one is added here on
# purpose; anything else git tracks at the root is a leftover.
ROOT_FILES = {
    ".gitattributes", ".gitignore", "CHANGELOG.md", "LICENSE", "MANIFEST.in", "Makefile",
    "README.md", "mkdocs.yml", "pyproject.toml", "setup.py",
}

# The folders whose paths are written from the root.
TOP = ("a0py", "csrc", "jvm", "docs", "tests", "bench", "examples")
# What a file named in a comment or a page ends with (a jar, a built .so, a
# recording are build outputs, not named sources).
NAMED_SUFFIXES = {".py", ".pyx", ".pxi", ".pxd", ".pyi", ".java", ".js", ".mjs", ".c", ".h",
                  ".md", ".html", ".css", ".toml", ".yml", ".yaml", ".cfg", ".proto"}
# The files whose text is read for paths.
SCANNED_SUFFIXES = {".py", ".pyx", ".pxi", ".pxd", ".pyi", ".java", ".js", ".mjs", ".c", ".h",
                    ".md", ".html", ".css", ".toml", ".cfg"}
HISTORY = ("bench/results/", "CHANGELOG.md")
# This file names missing paths on purpose, as examples.
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Words that look like repository paths and are not: (file, word) -> why.
NOT_REPOSITORY_PATHS = {
    # The protobuf file name inside the schema of a0py.NDArray, a name in the
    # descriptor, not a file of this repository.
    ("a0py/proto/protobuf_wire.py", "a0py/NDArray.proto"): "a descriptor's file name",
    ("docs/format.md", "a0py/NDArray.proto"): "a descriptor's file name",
    ("a0py/recording/headers.py", "a0py/PacketHeaders.proto"): "a descriptor's file name",
    # The layout test builds a package of its own in a temporary directory.
    ("tests/project/test_layout.py", "a0py/two/user.py"): "a module of the test's own tree",
}


def tracked_files():
    """The files git tracks, relative to the root; the test is skipped outside a
    git checkout (an unpacked sdist)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: what is tracked is unknown")
    return [name for name in out.decode("utf-8").split("\0") if name]


def subpackages():
    return sorted(p.name for p in (ROOT / "a0py").iterdir() if p.is_dir() and p.name != "__pycache__")


def path_pattern(packages):
    """A path starting with one of TOP or one of a0py's ``packages``, not in the
    middle of a longer path, a URL or a home or variable path."""
    starts = "|".join(map(re.escape, (*TOP, *packages)))
    return re.compile(rf"(?<![\w./~$-])((?:{starts})/[\w./-]*\w)")


def named_paths(text, pattern):
    """(line, word) of each path in ``text`` that ends in a file name of NAMED_SUFFIXES."""
    for match in pattern.finditer(text):
        word = match.group(1)
        if Path(word).suffix in NAMED_SUFFIXES:
            yield text.count("\n", 0, match.start()) + 1, word


def exists(word, named_in):
    """Whether ``word`` names a file of the repository: from the root, or in the
    short form under ``a0py/`` (``spark/planning.py``), under ``tests/``
    (``broker/test_broker_cli.py`` in tests/README.md) or beside the file that
    names it."""
    if word.split("/", 1)[0] in TOP:
        return (ROOT / word).exists()
    return any(place.exists() for place in (ROOT / "a0py" / word, ROOT / "tests" / word,
                                            (ROOT / named_in).parent / word))


def test_nothing_but_the_project_files_is_committed_at_the_root():
    stray = sorted(name for name in tracked_files() if "/" not in name and name not in ROOT_FILES)
    assert not stray, (f"files committed at the root that are not project files: {stray}; remove them "
                       "(git rm) or, if one belongs there, add it to ROOT_FILES")


def test_the_path_finder_sees_the_paths_it_is_meant_to_check():
    pattern = path_pattern(["spark", "binding"])
    text = ("see a0py/spark/_read.py and spark/_mcap.py (binding/packet.pxi),\n"
            "csrc/a0_arena.h, docs/format.md#frames, tests/core/test_packet.py.\n"
            "not: https://example.org/docs/x.md, ../tests/a.py, the encoding a0py/packet, "
            "a0py/spark/jars/a0py-spark.jar, jvm/src/")
    assert [w for _line, w in named_paths(text, pattern)] == [
        "a0py/spark/_read.py", "spark/_mcap.py", "binding/packet.pxi", "csrc/a0_arena.h", "docs/format.md",
        "tests/core/test_packet.py"]
    assert exists("spark/planning.py", "README.md") and exists("a0py/cli/__init__.py", "README.md")
    assert not exists("spark/_read.py", "README.md")


def test_no_comment_or_page_names_a_repository_file_that_does_not_exist():
    pattern = path_pattern(subpackages())
    missing = []
    for name in tracked_files():
        path = ROOT / name
        if (name.startswith(HISTORY) or name == THIS_FILE or path.suffix not in SCANNED_SUFFIXES
                or not path.is_file()):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for line, word in named_paths(text, pattern):
            if (name, word) not in NOT_REPOSITORY_PATHS and not exists(word, name):
                missing.append(f"{name}:{line}: {word}")
    assert not missing, "paths of files that do not exist (renamed or removed?):\n" + "\n".join(missing)
