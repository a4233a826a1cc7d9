"""The Arrow type of each ROS field kind (docs/spark.md "Decoded columns"),
shared by the rosbags path (:mod:`.ros`) and the columnar CDR path
(:mod:`.cdr_columns`)."""

import pyarrow as pa

from .base import UINT64

TIME_TYPES = {"builtin_interfaces/msg/Time"}  # ROS 1's time maps to it in rosbags
DURATION_TYPES = {"builtin_interfaces/msg/Duration"}
BYTE_TYPES = {"uint8", "byte", "char", "octet"}  # arrays of these are binary
# A scalar byte is read as rosbags reads it: signed (-128..127); char unsigned.

_INT32 = {"int8", "int16", "int32", "uint8", "uint16", "byte", "char"}
_INT64 = {"int64", "uint32"}
SCALAR_TYPES = {
    "bool": pa.bool_(), "float32": pa.float32(), "float64": pa.float64(), "float128": pa.float64(),
    "string": pa.string(), "wstring": pa.string(), "wchar": pa.string(), "uint64": UINT64,
    **{n: pa.int32() for n in _INT32}, **{n: pa.int64() for n in _INT64},
}
