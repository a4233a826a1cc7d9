"""``a0py pub`` and the size of the topic it creates: a packet too large for the
arena it would create fails and creates nothing; a bad ``--size`` is a usage
error naming the option; a packet that fits only a few times gets the
publisher's size warning, in the CLI's own form."""

import os
import re

from helpers.cli import a0, assert_fails_cleanly
from helpers.procs import REPO

import a0py
from a0py.proto import topic as tp


def test_pub_too_large_for_the_size_it_would_create_creates_nothing(root):
    result = a0("pub", "small", "-", "--size", "64K", input=b"z" * 100_000)
    assert_fails_cleanly(result, 1, "topic 'small'", "does not fit the 64 KiB pubsub arena",
                         "nothing created", "--size 1M")
    assert tp.list_topics(root) == {}
    # The size it names works, quietly.
    done = a0("pub", "small", "-", "--size", "1M", input=b"z" * 100_000)
    assert (done.returncode, done.err) == (0, "")


def test_pub_lines_creates_the_topic_with_its_first_line_only_if_it_fits(root):
    result = a0("pub", "small", "-", "--lines", "--size", "4K", input=b"y" * 5000 + b"\nshort\n")
    assert_fails_cleanly(result, 1, "topic 'small'", "does not fit", "nothing created")
    assert tp.list_topics(root) == {}
    assert a0("pub", "none", "-", "--lines", input=b"").returncode == 0
    assert tp.list_topics(root) == {}  # no line, no packet, no topic


def test_pub_bad_size_is_a_usage_error_naming_the_option(root):
    assert_fails_cleanly(a0("pub", "t", "x", "--size", "10"), 2, "'--size'", "at least")
    assert tp.list_topics(root) == {}


def test_pub_of_an_image_into_the_default_size_warns_once_with_the_size_to_use(root):
    result = a0("pub", "cam", "-", "--times", "3", input=b"\0" * 2_100_000)
    assert result.returncode == 0, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("a0py: warning: topic 'cam': its 4.0 MiB pubsub arena holds only 1 packet")
    assert "--size 32M" in lines[0] and "Traceback" not in result.err and "TopicSizeWarning" not in result.err
    assert a0py.Topic("cam").exists("pubsub")
    quiet = a0("pub", "roomy", "-", "--size", "32M", input=b"\0" * 2_100_000)
    assert (quiet.returncode, quiet.err) == (0, "")


def test_the_messages_docs_cli_md_shows_for_pub_sizes_are_the_ones_printed(root):
    with open(os.path.join(REPO, "docs", "cli.md"), encoding="utf-8") as f:
        page = f.read()
    shown = dict(re.findall(r"^\$ (head -c \d+ /dev/\w+ \| a0py pub .*)\n(a0py: .*)$", page, re.M))
    nothing = shown["head -c 100000 /dev/zero | a0py pub small - --size 64K"]
    warned = shown["head -c 2100000 /dev/urandom | a0py pub cam -"]
    assert a0("pub", "small", "-", "--size", "64K", input=b"\0" * 100_000).err == nothing + "\n"
    assert a0("pub", "cam", "-", input=os.urandom(2_100_000)).err == warned + "\n"
