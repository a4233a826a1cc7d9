"""The fact broker: one dataspace shared by many processes over shared memory.

See docs/broker.md.
"""

from .client import BrokerClient, Subscription
from .engine import Change, Engine
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
    "Change",
    "Engine",
    "UnknownSubscriptionError",
]
