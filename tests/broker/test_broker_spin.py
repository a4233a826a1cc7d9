"""Broker(spin=) and BrokerClient(spin=): the longest spin of the broker's wait for
requests and of a client's wait for replies; 0 never spins."""

import math

import pytest

from a0py.broker import Broker, BrokerClient, BrokerTypeError, wire
from a0py.dataspace import parse


def test_the_default_spin_is_the_module_constant_on_both_paths(name):
    assert wire.SPIN == 50e-6
    with Broker(name) as b, BrokerClient(name) as c:
        assert b.spin == c.spin == wire.SPIN
        c.ping()
        assert b._queue.reader.spin_max == pytest.approx(wire.SPIN)
        assert c._reply_transport.spin_max == pytest.approx(wire.SPIN)


def test_spin_0_never_spins_on_either_path(name):
    """Requests, replies and notifications go both ways; neither wait ever spins (each
    one sleeps), though the transport's default would have spun first."""
    with Broker(name, spin=0) as b, BrokerClient(name, spin=0) as c:
        rows = []
        sub = c.subscribe("x($v)", callback=rows.append)
        sub.wait(20)
        for i in range(50):
            c.claim(f"x({i})")
            c.ping()
        assert c.facts("x(_)") == [parse(f"x({i})") for i in range(50)]
        requests, replies = b._queue.reader, c._reply_transport
        assert requests.spin_max == replies.spin_max == 0
        assert requests.spins == 0 and replies.spins == 0
        assert requests.sleeps > 0 and replies.sleeps > 0
        assert len(rows) > 1


def test_a_spin_given_in_seconds_reaches_the_transports(name):
    with Broker(name, spin=5e-4) as b, BrokerClient(name, spin=1e-4) as c:
        c.ping()
        assert b._queue.reader.spin_max == pytest.approx(5e-4)
        assert c._reply_transport.spin_max == pytest.approx(1e-4)


@pytest.mark.parametrize("make", [Broker, BrokerClient])
@pytest.mark.parametrize("bad", ["2ms", None, True, [1e-3]])
def test_a_spin_that_is_not_a_number_is_refused(name, make, bad):
    with pytest.raises(BrokerTypeError, match="spin must be a number of seconds"):
        make(name, spin=bad)


@pytest.mark.parametrize("make", [Broker, BrokerClient])
@pytest.mark.parametrize("bad", [-1e-3, 1.5, math.nan, math.inf])
def test_a_spin_out_of_range_is_refused(name, make, bad):
    with pytest.raises(ValueError, match=r"spin must be from 0 \(no spinning\) to 1 seconds"):
        make(name, spin=bad)
