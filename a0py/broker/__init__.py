"""The fact broker: one dataspace shared by many processes over shared memory.

See docs/broker.md.
"""

from ._build_choice import COMPILED, engine_build
from .client import BrokerClient
from .errors import (
    BatchRejectedError,
    BrokerClosedError,
    BrokerError,
    BrokerNameError,
    BrokerRunningError,
    BrokerTimeoutError,
    BrokerTypeError,
    ResultTooLargeError,
    UnknownSubscriptionError,
)
from .server import Broker
from .subscription import Subscription
from .wire import broker_pid

Engine = engine_build.Engine
Change = engine_build.Change

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
    "ResultTooLargeError",
    "UnknownSubscriptionError",
    "broker_pid",
]
