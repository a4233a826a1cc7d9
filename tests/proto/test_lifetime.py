"""The lifetime the protocol objects share (:mod:`a0py.proto.lifetime`): a ``with``
block closes them and lets its exception through."""

import pytest

import a0py
from a0py import ClosedError
from a0py.proto import rpc
from a0py.proto.lifetime import Closeable

pytestmark = pytest.mark.slow

HELD = {"Cfg": a0py.Cfg, "Logger": a0py.Logger, "RpcServer": a0py.RpcServer,
        "RpcClient": a0py.RpcClient, "PrpcServer": a0py.PrpcServer,
        "PrpcClient": a0py.PrpcClient, "Subscriber": a0py.Subscriber,
        "LogListener": a0py.LogListener, "CfgWatcher": a0py.CfgWatcher,
        "Discovery": a0py.Discovery}


@pytest.mark.parametrize("name", sorted(HELD))
def test_every_protocol_object_that_closes_is_a_closeable(name):
    assert issubclass(HELD[name], Closeable)


def test_a_with_block_closes_and_lets_its_exception_through(root):
    with pytest.raises(KeyError, match="inside"):
        with a0py.Cfg("life/cfg") as cfg, a0py.Logger("life/log") as log, \
                a0py.Subscriber("life/sub", print) as sub, a0py.RpcServer("life/rpc", print) as srv:
            raise KeyError("inside")
    with pytest.raises(ClosedError):
        cfg.write({"a": 1})
    with pytest.raises(ClosedError):
        log.info("x")
    assert sub.closed and srv.closed
    assert rpc.server_pid("life/rpc") is None
