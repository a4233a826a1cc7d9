"""The README and docs/ lead somewhere: every relative markdown link in README.md
and docs/*.md names a file or directory of the repository (the part before any
``#anchor``), and no page points at notes kept outside the repository."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(page):
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # code blocks are not links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_the_pages_have_links_to_check():
    assert len(PAGES) > 10
    assert "docs/quickstart.md" in links(REPO / "README.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves_inside_the_repository(page):
    for target in links(page):
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(REPO), f"{page.name}: {target} leaves the repository"
        assert path.exists(), f"{page.name}: {target} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_names_notes_outside_the_repository(page):
    text = page.read_text(encoding="utf-8")
    for name in ("DESIGN.md", "NOTES.md", "docs/DESIGN", "NOTES \""):
        assert name not in text, f"{page.name} names {name}, which is not in the repository"


def test_the_readme_links_the_quickstart_first():
    first = links(REPO / "README.md")[0]
    assert first == "docs/quickstart.md"


def test_cli_md_shows_the_arena_format_version_info_prints(tmp_path):
    import os
    import subprocess
    import sys

    section = (REPO / "docs" / "cli.md").read_text(encoding="utf-8").split("### `info --shm/--file`")[1]
    [shown] = re.findall(r"^format .*$", section, re.M)
    arena = tmp_path / "demo.arena"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = [sys.executable, "-m", "a0py"]
    subprocess.run([*run, "write", "--file", str(arena), "--size", "1M", "hello"], env=env, check=True,
                   capture_output=True, timeout=60)
    out = subprocess.run([*run, "info", "--file", str(arena)], env=env, check=True, capture_output=True,
                         text=True, timeout=60).stdout
    [printed] = re.findall(r"^format .*$", out, re.M)
    assert printed.split() == shown.split()


def test_spark_md_says_how_to_set_the_python_and_stop_the_cluster():
    section = (REPO / "docs" / "spark.md").read_text(encoding="utf-8").split("## On a cluster")[1]
    section = section.split("\n## ")[0]
    assert "export PYSPARK_PYTHON=" in section
    assert "kill $WORKER1 $WORKER2" in section and "kill $MASTER" in section
