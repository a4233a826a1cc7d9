"""Columnar decoding of ROS 2 CDR messages: the Arrow columns of a batch
cut straight out of the message bytes with numpy, instead of one rosbags
object per message.

Why: per-message deserialization costs tens of µs for an Imu in Python;
the bytes of messages whose variable-length parts (strings, sequences)
have the same lengths share one layout, so each leaf field of a group of
such messages is one strided numpy view. ``python -m bench.decode`` gives
the figures side by side (``a0py decode`` against ``rosbags+arrow``).

How a batch is read:

1. per message, a short generated function walks only the variable-length
   parts (one ``unpack_from`` each) and returns their lengths (the layout
   *signature*) and where the message ends; fixed runs between them are a
   table lookup by the position modulo 8 (every CDR alignment divides 8);
2. messages are grouped by (byte order, signature); each group's layout
   (every leaf's offset) is computed once, its bytes stacked into a 2-D
   ``uint8`` array, and each leaf column cut from it;
3. a layout shared by fewer than ``ros.MIN_GROUP`` messages of the batch, and
   anything unusual (a length past the end, more than 3 bytes left over, a
   string without its terminator or not UTF-8, a type this plan does not
   cover) sends the message, or the group, to rosbags, which gives the row
   its value or its error. The two paths must give the same rows; the tests
   and the fuzz (tests/recording/test_decode*.py) compare them.

CDR rules followed (XCDR1, as ROS 2 and rosbags write and read it): offsets
count from after the 4-byte encapsulation header; a primitive is aligned to
its size (8 at most), a string or sequence length (uint32) to 4; a
sequence's elements are aligned to their size only when it has any; a
string's length counts its NUL terminator.

Covered: primitives, strings, fixed arrays and sequences of primitives
(``uint8``/``byte``/``char`` ones as binary), nested messages, Time and
Duration. Arrays or sequences of strings or of messages (and ``wstring``)
leave the whole type to rosbags."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - imported by Array.cast on first use; here, not inside a timed batch

from .base import TIMESTAMP, UINT64
from .ros_types import BYTE_TYPES, DURATION_TYPES, SCALAR_TYPES, TIME_TYPES

_PRIM = {  # ROS name -> (numpy type, size); byte/octet signed, char unsigned, as rosbags reads them
    "bool": ("u1", 1), "byte": ("i1", 1), "char": ("u1", 1), "octet": ("i1", 1), "uint8": ("u1", 1),
    "int8": ("i1", 1), "int16": ("i2", 2), "uint16": ("u2", 2), "int32": ("i4", 4), "uint32": ("u4", 4),
    "int64": ("i8", 8), "uint64": ("u8", 8), "float32": ("f4", 4), "float64": ("f8", 8),
}
_U32 = {b"\x00\x01": struct.Struct("<I").unpack_from, b"\x00\x00": struct.Struct(">I").unpack_from}


class Unsupported(Exception):
    """The type has a part this plan does not cover (rosbags decodes it)."""


def _align(pos, a):
    return (pos + a - 1) & -a


class _Leaf:
    """One run of bytes of a message: a primitive, a fixed array, a string or a sequence."""

    def __init__(self, kind, base, count=0):
        self.kind = kind  # "prim", "array", "string", "seq"
        self.base = base
        self.count = count
        if kind == "string":
            self.align, self.size = 4, 0
        else:
            self.dtype, self.size = _PRIM[base]
            self.align = self.size if kind in ("prim", "array") else 4


class CdrPlan:
    """The columnar plan of one ROS 2 message type, or :class:`Unsupported`."""

    def __init__(self, store, name, top_type):
        from rosbags.typesys.base import Nodetype

        self._nodetype = Nodetype
        self.leaves = []
        self.tree = self._node(store, (Nodetype.NAME, name), top=True)
        if self.tree[-1] != top_type:
            raise Unsupported("type mismatch")
        self._signature = self._generate()
        self._layouts = {}

    # -- the plan ---------------------------------------------------------
    def _leaf(self, kind, base, count=0):
        self.leaves.append(_Leaf(kind, base, count))
        return len(self.leaves) - 1

    def _node(self, store, desc, top=False):
        """("struct", names, children, type) | ("time"/"duration", sec, nsec, type) | ("leaf", id, type)."""
        nt = self._nodetype
        kind, arg = desc
        if kind == nt.BASE:
            base = arg[0]
            if base == "string":
                return ("leaf", self._leaf("string", base), pa.string())
            if base not in _PRIM:
                raise Unsupported(base)
            return ("leaf", self._leaf("prim", base), SCALAR_TYPES[base])
        if kind == nt.NAME:
            fields = store.get_msgdef(arg).fields
            if not fields:
                raise Unsupported("empty message")
            if not top and (arg in TIME_TYPES or arg in DURATION_TYPES):
                if [f[1] for f in fields] != [(nt.BASE, ("int32", 0)), (nt.BASE, ("uint32", 0))]:
                    raise Unsupported(arg)
                sec, nsec = self._leaf("prim", "int32"), self._leaf("prim", "uint32")
                if arg in TIME_TYPES:
                    return ("time", sec, nsec, TIMESTAMP)
                return ("duration", sec, nsec, pa.int64())
            children = [self._node(store, f[1]) for f in fields]
            names = [f[0] for f in fields]
            return ("struct", names, children, pa.struct([pa.field(n, c[-1]) for n, c in zip(names, children)]))
        sub, count = arg
        if sub[0] != nt.BASE or sub[1][0] not in _PRIM:
            raise Unsupported("array of strings or messages")
        base = sub[1][0]
        leaf = self._leaf("array" if kind == nt.ARRAY else "seq", base, count)
        if base in BYTE_TYPES:
            return ("leaf", leaf, pa.binary())
        return ("leaf", leaf, pa.list_(SCALAR_TYPES[base]))

    def _generate(self):
        """The per-message walk, as Python source compiled once: fixed runs are
        a table lookup, each variable part one unpack."""
        lines = ["def signature(b, u32):", "    pos = 0", "    sig = []"]
        tables = []
        run = []

        def flush():
            if not run:
                return
            deltas = []
            for m in range(8):
                p = m
                for leaf in run:
                    p = _align(p, leaf.align) + leaf.size * (leaf.count if leaf.kind == "array" else 1)
                deltas.append(p - m)
            tables.append(tuple(deltas))
            lines.append(f"    pos += T{len(tables) - 1}[pos & 7]")
            run.clear()

        for leaf in self.leaves:
            if leaf.kind in ("prim", "array"):
                run.append(leaf)
                continue
            flush()
            lines.append("    pos = (pos + 3) & -4")
            lines.append("    n = u32(b, pos + 4)[0]")
            lines.append("    sig.append(n)")
            if leaf.kind == "string":
                lines.append("    pos += 4 + n")
            else:
                lines.append("    pos += 4")
                if leaf.size > 1:
                    lines.append(f"    if n: pos = (pos + {leaf.size - 1}) & -{leaf.size}")
                lines.append(f"    pos += n * {leaf.size}")
        flush()
        lines.append("    return tuple(sig), pos")
        scope = {f"T{i}": t for i, t in enumerate(tables)}
        exec("\n".join(lines), scope)  # noqa: S102 - source generated above from the schema's field kinds only
        return scope["signature"]

    def _layout(self, sig):
        """Offsets (in the payload after the header) and counts of every leaf
        for one signature, and the message's end."""
        got = self._layouts.get(sig)
        if got is None:
            offsets, counts, pos, k = [], [], 0, 0
            for leaf in self.leaves:
                if leaf.kind in ("prim", "array"):
                    pos = _align(pos, leaf.align)
                    n = 1 if leaf.kind == "prim" else leaf.count
                    offsets.append(pos)
                    counts.append(n)
                    pos += n * leaf.size
                    continue
                pos = _align(pos, 4)
                n = sig[k]
                k += 1
                if leaf.kind == "string":
                    offsets.append(pos + 4)
                    counts.append(n)
                    pos += 4 + n
                else:
                    pos += 4
                    if n:
                        pos = _align(pos, leaf.size)
                    offsets.append(pos)
                    counts.append(n)
                    pos += n * leaf.size
            got = self._layouts[sig] = (offsets, counts, pos)
            if len(self._layouts) > 4096:  # many distinct layouts: keep the cache bounded
                self._layouts.clear()
        return got

    # -- a batch ------------------------------------------------------------
    def group(self, payloads):
        """``({(header, signature): [row, ...]}, [rows for rosbags])``."""
        groups, slow = {}, []
        signature = self._signature
        for row, data in enumerate(payloads):
            try:
                head = bytes(data[:2])
                u32 = _U32.get(head)
                if u32 is None or len(data) < 4:
                    slow.append(row)
                    continue
                sig, end = signature(data, u32)
                spare = len(data) - 4 - end
                if spare < 0 or spare > 3:
                    slow.append(row)
                    continue
            except Exception:
                slow.append(row)
                continue
            groups.setdefault((head, sig), []).append(row)
        return groups, slow

    def build_group(self, head, sig, datas):
        """The Arrow struct array of one group's messages (same layout); raises
        on anything rosbags would judge (the caller hands the group to it)."""
        offsets, counts, end = self._layout(sig)
        if any(leaf.kind == "string" and n < 1 for leaf, n in zip(self.leaves, counts)):
            raise ValueError("a string without its terminator")
        k = len(datas)
        if end == 0:
            raise ValueError("an empty layout")
        block = np.frombuffer(b"".join([bytes(d[4:4 + end]) for d in datas]), np.uint8).reshape(k, end)
        order = "<" if head == b"\x00\x01" else ">"
        return self._build(self.tree, block, offsets, counts, order, k)

    def _column(self, leaf_id, block, offsets, counts, order, k):
        """A leaf's numpy values: shape (k,) for a primitive, (k, count) otherwise."""
        leaf = self.leaves[leaf_id]
        off, n = offsets[leaf_id], counts[leaf_id]
        width = n if leaf.kind == "string" else leaf.size * n
        raw = np.ascontiguousarray(block[:, off:off + width])
        if leaf.kind == "string":
            return raw
        values = raw.view(order + leaf.dtype).reshape(k, n)
        return values[:, 0] if leaf.kind == "prim" else values

    def _build(self, node, block, offsets, counts, order, k):
        kind = node[0]
        if kind == "struct":
            arrays = [self._build(c, block, offsets, counts, order, k) for c in node[2]]
            return pa.StructArray.from_arrays(arrays, fields=list(node[3]))
        if kind in ("time", "duration"):
            sec = self._column(node[1], block, offsets, counts, order, k).astype(np.int64)
            nsec = self._column(node[2], block, offsets, counts, order, k).astype(np.int64)
            if kind == "time":
                return pa.array(sec * 1_000_000 + nsec // 1000, type=TIMESTAMP)
            return pa.array(sec * 1_000_000_000 + nsec, type=pa.int64())
        leaf_id, typ = node[1], node[2]
        leaf = self.leaves[leaf_id]
        values = self._column(leaf_id, block, offsets, counts, order, k)
        if leaf.kind == "string":
            n = counts[leaf_id]
            if n and not (values[:, n - 1] == 0).all():
                raise ValueError("a string without its terminator")
            text = np.ascontiguousarray(values[:, : n - 1])
            data = pa.py_buffer(text.tobytes())
            offs = pa.py_buffer((np.arange(k + 1, dtype=np.int32) * (n - 1)).tobytes())
            return pa.Array.from_buffers(pa.binary(), k, [None, offs, data]).cast(pa.string())
        if leaf.kind == "prim":
            return _arrow(values, leaf.base, typ)
        n = values.shape[1]
        offs = pa.array(np.arange(k + 1, dtype=np.int32) * n)
        if pa.types.is_binary(typ):
            data = pa.py_buffer(np.ascontiguousarray(values).tobytes())
            return pa.Array.from_buffers(pa.binary(), k, [None, offs.buffers()[1], data])
        return pa.ListArray.from_arrays(offs, _arrow(values.reshape(-1), leaf.base, typ.value_type))


def _arrow(values, base, typ):
    if base == "bool":
        return pa.array(values != 0, type=pa.bool_())
    if typ == UINT64:
        return pa.array(values.astype(np.uint64), type=pa.uint64()).cast(UINT64)
    return pa.array(values.astype(typ.to_pandas_dtype(), copy=False), type=typ)
