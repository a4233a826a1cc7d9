"""Bad paths and names given to commands are usage errors (exit 2) that name
the problem, never a traceback: a root that is a file, a device or in /proc,
a recording directory that is /dev/null, an empty broker name."""

import pytest
from helpers.cli import a0, assert_fails_cleanly


@pytest.mark.parametrize("command", [["ls"], ["echo", "t"], ["pub", "t", "x"], ["view"]])
@pytest.mark.parametrize("bad_root, why", [("/dev/null", "lies in /dev"),
                                           ("/proc/self", "lies in /proc"),
                                           ("{file}", "is not a directory")])
def test_a_root_that_cannot_hold_topics_is_a_usage_error(command, bad_root, why, tmp_path):
    f = tmp_path / "plain-file"
    f.write_text("")
    result = a0(*command, "--root", bad_root.format(file=f))
    assert_fails_cleanly(result, 2, "--root", why)


def test_a_root_directory_in_dev_shm_is_allowed(tmp_path):
    result = a0("ls", "--root", "/dev/shm/a0py-test-not-made-here")
    assert result.returncode == 0, result.err


def test_record_into_dev_null_is_a_usage_error():
    assert_fails_cleanly(a0("record", "-o", "/dev/null", "t"), 2, "--out", "/dev/null")


def test_record_into_a_file_is_a_usage_error(tmp_path):
    f = tmp_path / "f.mcap"
    f.write_text("")
    assert_fails_cleanly(a0("record", "-o", str(f), "t"), 2, "--out", "is a file")


@pytest.mark.parametrize("args", [["broker", ""], ["claim", "-b", "", "x"], ["facts", "-b", ""]])
def test_an_empty_broker_name_is_a_usage_error(args):
    assert_fails_cleanly(a0(*args), 2, "may not be empty")
