"""Bad option values on every command are usage errors, not tracebacks or
commands that run forever: the types of a0py.cli.types, run through the real
``a0py`` script in subprocesses (each bounded by the CLI layer's limits, tests/cli/conftest.py)."""

import math
import os
import uuid

import click
import pytest
from helpers.cli import a0, assert_fails_cleanly

import a0py
from a0py.cli.types import (
    MAX_COUNT,
    RATE,
    SECONDS,
    BoundedInt,
    ByteSize,
    Count,
    FiniteFloat,
    RootSpec,
)
from a0py.errors import ArgumentError
from a0py.proto import topic as tp

# Each of these ran forever (NaN or infinity where a number of seconds or a
# rate is meant, a negative count) or ended in a traceback (a window too
# large for a C size) before.
BAD_VALUES = [
    (("hz", "t", "--window", "99999999999999999999999"), "'--window'"),
    (("bw", "t", "--window", "99999999999999999999999"), "'--window'"),
    (("hz", "t", "--duration", "nan"), "'--duration'"),
    (("hz", "t", "--duration", "inf"), "'--duration'"),
    (("bw", "t", "--duration", "nan"), "'--duration'"),
    (("log", "t", "--timeout", "nan"), "'--timeout'"),
    (("rpc", "t", "x", "--wait-for-server", "nan"), "'--wait-for-server'"),
    (("rpc", "t", "x", "--timeout", "-inf"), "'--timeout'"),
    (("pub", "t", "x", "--rate", "nan"), "'--rate'"),
    (("pub", "t", "x", "--rate", "1e-300"), "'--rate'"),
    (("pub", "t", "x", "--size", "1.5M"), "'1.5M' is not a size"),
    (("echo", "t", "--timeout", "nan"), "'--timeout'"),
    (("echo", "t", "-n", "-1"), "'-n'"),
    (("cfg", "t", "watch", "--timeout", "inf"), "'--timeout'"),
    (("tail", "--shm", "x", "--timeout", "nan"), "'--timeout'"),
    (("subscribe", "x($a)", "--count", "-1"), "'--count'"),
    (("subscribe", "x($a)", "--timeout", "nan"), "'--timeout'"),
    (("claim", "x(1)", "--for", "nan"), "'--for'"),
    (("ls", "--root", "shm:"), "names no prefix"),
    (("ls", "--root", "shm:a/b"), "prefix after 'shm:'"),
    (("view", "--root", "shm:a/b", "--port", "0"), "prefix after 'shm:'"),
    (("view", "--root", "shm:", "--port", "0"), "names no prefix"),
]


@pytest.mark.parametrize("args, needle", BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_a_bad_value_is_a_usage_error_naming_the_option(root, args, needle):
    result = a0(*args, timeout=30)
    assert_fails_cleanly(result, 2, needle, "Invalid value")
    assert tp.list_topics(root) == {}  # nothing was created


def test_a_bad_root_in_the_environment_is_a_usage_error_too(root, monkeypatch):
    for spec in ("shm:", "shm:a/b"):
        monkeypatch.setenv("A0PY_ROOT", spec)
        for args in (("ls",), ("view", "--port", "0"), ("echo", "t")):
            assert_fails_cleanly(a0(*args, timeout=30), 2, "A0PY_ROOT", repr(spec))


def test_subscribe_without_a_broker_fails_within_its_timeout_naming_it():
    from a0py.broker import wire

    name = f"nobroker{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        result = a0("subscribe", "-b", name, "--timeout", "0.5", "temp($room, $t)", timeout=30)
    finally:
        try:
            a0py.Arena.unlink_shm(wire.request_arena_name(name))
        except a0py.ArenaNotFoundError:
            pass
    assert_fails_cleanly(result, 1, "a0py: error: ", repr(name))


def test_the_view_refuses_a_bad_root_before_serving():
    from a0py.view import make_server

    with pytest.raises(ArgumentError, match="prefix after 'shm:'"):
        make_server(root="shm:a/b", port=0)
    with pytest.raises(ArgumentError, match="names no prefix"):
        make_server(root="shm:", port=0)


# ------------------------------------------------------------ the types themselves


def _convert(kind, value):
    return kind.convert(value, None, None)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", math.nan, math.inf])
def test_finite_float_refuses_nan_and_infinities(value):
    for kind in (SECONDS, RATE, FiniteFloat(), FiniteFloat(0, 1, min_open=True)):
        with pytest.raises(click.BadParameter, match="not a finite number"):
            _convert(kind, value)


def test_seconds_rate_and_counts_keep_to_their_ranges():
    assert _convert(SECONDS, "0") == 0.0 and _convert(SECONDS, "1e9") == 1e9
    with pytest.raises(click.BadParameter, match="0<=x<=1e"):
        _convert(SECONDS, "1e10")
    with pytest.raises(click.BadParameter):
        _convert(SECONDS, "-0.5")
    assert _convert(RATE, "0.5") == 0.5
    with pytest.raises(click.BadParameter):
        _convert(RATE, "0")
    assert _convert(Count(), "3") == 3 and _convert(Count(min=0), "0") == 0
    with pytest.raises(click.BadParameter, match="x>=1"):
        _convert(Count(), "0")
    with pytest.raises(click.BadParameter):
        _convert(Count(), str(MAX_COUNT + 1))
    with pytest.raises(click.BadParameter, match="2<=x<=10"):
        _convert(BoundedInt(2, 10), "11")
    with pytest.raises(TypeError):
        BoundedInt(2, None)
    assert _convert(ByteSize(), "16M") == 16 << 20
    # The grammar Topic(size=) and A0PY_TOPIC_SIZES read (a0py.proto.sizes): T too, any case.
    for text in ("64kib", "16m", "2T", "3 GB"):
        assert _convert(ByteSize(), text) == tp.parse_size(text)
    with pytest.raises(click.BadParameter, match="too large"):
        _convert(ByteSize(), "99999999999999G")


def test_root_spec_is_root_parse():
    assert _convert(RootSpec(), "shm:fleet7") == tp.Root("shm", "fleet7")
    for bad in ("shm:", "shm:a/b", "shm:.x"):
        with pytest.raises(click.BadParameter):
            _convert(RootSpec(), bad)
        with pytest.raises(ArgumentError):
            tp.Root.parse(bad)
