"""The fact broker: one dataspace shared by many processes over shared memory.

See docs/broker.md.
"""

from ._impl import COMPILED, impl
from .client import BrokerClient, Subscription
from .errors import (
    BatchRejectedError,
    BrokerClosedError,
    BrokerError,
    BrokerNameError,
    BrokerRunningError,
    BrokerTimeoutError,
    BrokerTypeError,
    UnknownSubscriptionError,
)
from .server import Broker

Engine = impl.Engine
Change = impl.Change

__all__ = [
    "Broker",
    "BrokerClient",
    "Subscription",
    "BatchRejectedError",
    "BrokerClosedError",
    "BrokerError",
    "BrokerNameError",
    "BrokerRunningError",
    "BrokerTimeoutError",
    "BrokerTypeError",
    "COMPILED",
    "Change",
    "Engine",
    "UnknownSubscriptionError",
]
