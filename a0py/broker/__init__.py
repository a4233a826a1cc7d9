"""The fact broker: one dataspace shared by many processes over shared memory.

See docs/broker.md.
"""

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

__all__ = [
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
