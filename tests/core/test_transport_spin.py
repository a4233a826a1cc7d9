"""Transport.spin_max (the adaptive waiter's longest spin) and the spins / sleeps counts.

How the adaptive budget learns (a quick wake refills it, a late one does not, a
spin_max of 0 never spins) is csrc/tests/test_spin.c's, with the writer stepped."""

import math
import os
import threading

import pytest

import a0py
from a0py import ArgumentError


@pytest.fixture
def tr():
    return a0py.Transport(a0py.Arena.heap(1 << 16))


def test_spin_max_defaults_to_50_us_and_takes_seconds(tr):
    assert tr.spin_max == pytest.approx(50e-6)
    tr.spin_max = 2e-3
    assert tr.spin_max == pytest.approx(2e-3)
    tr.spin_max = 0
    assert tr.spin_max == 0
    tr.spin_max = 1
    assert tr.spin_max == 1.0
    assert tr.spin is None        # still the adaptive waiter


@pytest.mark.parametrize("bad", [-1e-6, math.nan, math.inf, 1.001, 5])
def test_a_spin_max_out_of_range_is_refused_naming_the_arena(tr, bad):
    tr.spin_max = 1e-3
    with pytest.raises(ArgumentError, match=r"heap arena: spin_max must be between 0 and 1 seconds"):
        tr.spin_max = bad
    assert tr.spin_max == pytest.approx(1e-3)


@pytest.mark.parametrize("bad", ["0.001", b"1", True, None, [1e-3]])
def test_a_spin_max_that_is_not_a_number_is_refused(tr, bad):
    with pytest.raises(ArgumentError, match=r"heap arena: spin_max must be a number of seconds"):
        tr.spin_max = bad


def test_a_spin_max_of_0_never_spins(tr):
    """More waits than the budget's probe period (256): not one spins, each sleeps."""
    tr.spin_max = 0
    for _ in range(300):
        assert tr.read_next(timeout=0.0002) is None
    assert tr.spins == 0
    assert tr.sleeps >= 300
    writer = a0py.Transport(tr.arena)
    t = threading.Timer(0.01, writer.write, (b"x",))
    t.start()
    assert tr.read_next(timeout=10)[1] == b"x"
    t.join()
    assert tr.spins == 0


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="with one CPU the waiter never spins")
def test_the_default_waiter_spins_before_it_sleeps_and_counts_both(tr):
    assert tr.read_next(timeout=0.001) is None      # a fresh budget: spins, then sleeps
    assert (tr.spins, tr.sleeps) == (1, 1)
