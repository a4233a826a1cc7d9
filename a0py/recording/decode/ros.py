"""ROS messages (``cdr`` with ``ros2msg`` / ``ros2idl`` schemas; ``ros1``
with ``ros1msg``) decoded by ``rosbags``, into Arrow columns.

Why ``rosbags``: on ``sensor_msgs/msg/Imu`` (324 B CDR) its generated
deserializer read 19–37 k messages/s against 10–12 k for
``mcap-ros2-support``'s dynamic decoder, with the same values
(``python -m bench.decode``, 2026-11-26, bench/results/2026-11-26-decode.md).
Its message objects keep numeric arrays as numpy arrays, which the column
builders below concatenate without a Python loop per element. CDR messages
whose layouts repeat skip it altogether (:mod:`.cdr_columns`: 178–237 k
Imu messages/s to Arrow, against 15–16 k through rosbags objects).

Each decoder has a typestore of its own, filled from its channel's schema
text alone (two channels may carry two versions of a type). The Arrow type
follows docs/spark.md "Decoded columns": ``builtin_interfaces/msg/Time``
(and ROS 1 ``time``) is a UTC timestamp in µs, ``Duration`` bigint ns,
``uint64`` decimal(20,0), ``uint8[]`` / ``byte[]`` / ``char[]`` binary."""

from __future__ import annotations

import operator
import re

import numpy as np
import pyarrow as pa

from ..errors import RecordingFormatError
from .base import TIMESTAMP, UINT64, Decoder, as_list
from .ros_types import BYTE_TYPES, DURATION_TYPES, SCALAR_TYPES, TIME_TYPES

# The longest sequence a message may declare: a corrupt length must fail
# fast, not allocate (rosbags checks it before reading).
MAX_SEQUENCE = 1 << 28
# A layout shared by fewer messages than this goes to rosbags: a group costs
# a few numpy and Arrow calls per field whatever its size (about 0.4 ms for
# std_msgs/String on this machine, against about 30 µs a message for rosbags).
MIN_GROUP = 32

_NUMPY = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float32(): np.float32, pa.float64(): np.float64,
          pa.bool_(): np.bool_}
_SEPARATOR = re.compile(r"^={10,}\s*$", re.MULTILINE)


def normalize_name(name):
    """``pkg/Type`` (ROS 1) to ``pkg/msg/Type``, as rosbags names types."""
    parts = name.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else name


def _typestore(topic, schema_name, schema_encoding, text):
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    store = get_typestore(Stores.EMPTY)
    store.max_sequence_length = MAX_SEQUENCE
    name = normalize_name(schema_name)
    if schema_encoding == "ros2idl":
        types = {}
        for section in _SEPARATOR.split(text):
            body = re.sub(r"^\s*IDL: \S+\s*$", "", section, count=1, flags=re.MULTILINE)
            if body.strip():
                types.update(get_types_from_idl(body))
    else:
        types = get_types_from_msg(text, name)
    # ROS 1's time/duration are built-in, never in the schema text.
    for t, fields in (("builtin_interfaces/msg/Time", "int32 sec\nuint32 nanosec"),
                      ("builtin_interfaces/msg/Duration", "int32 sec\nuint32 nanosec")):
        if t not in types:
            types.update(get_types_from_msg(fields, t))
    store.register(types)
    if name not in store.fielddefs:
        raise ValueError(f"the schema text does not define {name}")
    store.get_msgdef(name)  # generates the (de)serializers: fails on a missing dependency
    return store, name


class _Columns:
    """Builds one Arrow array from a list of rosbags values of one field type."""

    def __init__(self, store, desc, top=False):
        from rosbags.typesys.base import Nodetype

        kind, arg = desc
        self.build = None
        if kind == Nodetype.BASE:
            base = arg[0]
            if base not in SCALAR_TYPES:
                raise ValueError(f"unknown ROS type {base!r}")
            self.type = SCALAR_TYPES[base]
            self.build = self._scalar
        elif kind == Nodetype.NAME:
            if arg in TIME_TYPES and not top:
                self.type = TIMESTAMP
                self.build = self._time
            elif arg in DURATION_TYPES and not top:
                self.type = pa.int64()
                self.build = self._duration
            else:
                fields = store.get_msgdef(arg).fields
                self.names = [f[0] for f in fields]
                self.children = [_Columns(store, f[1]) for f in fields]
                self.getters = [operator.attrgetter(n) for n in self.names]
                self.type = pa.struct([pa.field(n, c.type) for n, c in zip(self.names, self.children)])
                self.build = self._struct if self.names else self._empty
        else:  # ARRAY or SEQUENCE
            sub = arg[0]
            if sub[0] == Nodetype.BASE and sub[1][0] in BYTE_TYPES:
                self.type = pa.binary()
                self.build = self._bytes
            else:
                self.item = _Columns(store, sub)
                self.type = pa.list_(self.item.type)
                self.build = self._list

    def _scalar(self, values):
        if self.type == UINT64:  # rosbags gives numpy.uint64 inside arrays, which Arrow refuses as decimal
            values = [None if v is None else int(v) for v in values]
        return pa.array(values, type=self.type)

    def _time(self, values):
        n = len(values)
        sec = np.fromiter((v.sec for v in values), np.int64, n)
        nsec = np.fromiter((v.nanosec for v in values), np.int64, n)
        return pa.array(sec * 1_000_000 + nsec // 1000, type=TIMESTAMP)

    def _duration(self, values):
        n = len(values)
        sec = np.fromiter((v.sec for v in values), np.int64, n)
        nsec = np.fromiter((v.nanosec for v in values), np.int64, n)
        return pa.array(sec * 1_000_000_000 + nsec, type=pa.int64())

    def _struct(self, values):
        arrays = [c.build(list(map(g, values))) for g, c in zip(self.getters, self.children)]
        return pa.StructArray.from_arrays(arrays, fields=list(self.type))

    def _empty(self, values):
        return pa.array([{}] * len(values), type=self.type)

    @staticmethod
    def _offsets(values):
        lengths = np.fromiter(map(len, values), np.int64, len(values))
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= 1 << 31:
            raise ValueError("more than 2**31 array elements in one batch")
        return pa.array(offsets.astype(np.int32))

    def _bytes(self, values):
        offsets = self._offsets(values)
        data = b"".join(bytes(v) if isinstance(v, bytes | bytearray) else np.ascontiguousarray(v).view(np.uint8).tobytes()
                        for v in values)
        return pa.Array.from_buffers(pa.binary(), len(values), [None, offsets.buffers()[1], pa.py_buffer(data)])

    def _list(self, values):
        offsets = self._offsets(values)
        item = self.item
        np_type = _NUMPY.get(item.type) if item.build == item._scalar else None
        if np_type is not None:
            flat = np.concatenate([np.asarray(v) for v in values]) if values else np.empty(0, np_type)
            child = pa.array(flat.astype(np_type, copy=False), type=item.type)
        else:
            child = item.build([x for v in values for x in v])
        return pa.ListArray.from_arrays(offsets, child)


class RosDecoder(Decoder):
    """``cdr`` (ROS 2) or ``ros1`` messages of one type, decoded by rosbags."""

    def __init__(self, topic, schema_name, schema_encoding, schema_data, message_encoding):
        from rosbags.typesys.base import Nodetype

        try:
            text = bytes(schema_data).decode("utf-8")
            self._store, self._name = _typestore(topic, schema_name, schema_encoding, text)
            self._columns = _Columns(self._store, (Nodetype.NAME, self._name), top=True)
        except Exception as e:
            raise RecordingFormatError(
                f"channel {topic!r}: schema {schema_name!r} ({schema_encoding}) does not parse: "
                f"{type(e).__name__}: {e}") from e
        super().__init__(topic, schema_name, self._columns.type)
        deserialize = self._store.deserialize_cdr if message_encoding == "cdr" else self._store.deserialize_ros1
        name = self._name
        self._parse = lambda data: deserialize(data, name)
        self._plan = None
        if message_encoding == "cdr":
            from .cdr_columns import CdrPlan, Unsupported

            try:
                self._plan = CdrPlan(self._store, self._name, self.arrow_type)
            except Unsupported:
                pass  # rosbags decodes every message of this type

    def _build(self, objects):
        return self._columns.build(objects)

    def decode(self, payloads):
        """As :meth:`Decoder.decode`; CDR messages go through the columnar
        plan (:mod:`.cdr_columns`) where it covers them, the rest through
        rosbags, with the same values."""
        plan = self._plan
        if plan is None:
            return super().decode(payloads)
        payloads = as_list(payloads)
        n = len(payloads)
        groups, slow = plan.group(payloads)
        parts, where, start = [], [None] * n, 0
        for (head, sig), rows in groups.items():
            if len(rows) < MIN_GROUP:
                slow.extend(rows)
                continue
            try:
                part = plan.build_group(head, sig, [payloads[r] for r in rows])
            except Exception:
                slow.extend(rows)  # rosbags decides: a value or an error
                continue
            parts.append(part)
            for k, r in enumerate(rows):
                where[r] = start + k
            start += len(rows)
        errors = [None] * n
        if slow:
            slow.sort()
            values, slow_errors = super().decode([payloads[r] for r in slow])
            parts.append(values)
            for k, (r, e) in enumerate(zip(slow, slow_errors.to_pylist())):
                where[r] = start + k
                errors[r] = e
        if not parts:
            return pa.array([], type=self.arrow_type), pa.array(errors, type=pa.string())
        values = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1 or slow:
            values = values.take(pa.array(where, type=pa.int64()))
        return values, pa.array(errors, type=pa.string())
