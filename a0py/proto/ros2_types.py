"""ROS 2 message types without rclpy: the full definition of a type in the layout
rosbag2 writes into MCAP, and CDR encoding and decoding through ``rosbags``
(imported on first use).

**Definitions.** A ``ros2msg`` schema's data is the type's ``.msg`` text, then each
type it depends on, each once, after a line of 80 ``=`` and ``MSG: pkg/Name``
(rosbag2's layout; ``rosbags``, ``mcap-ros2-support`` and Foxglove read it). The
texts come from the ``.msg`` files the ROS 2 wheels install under
``<prefix>/share/<pkg>/msg/`` (the prefixes of ``AMENT_PREFIX_PATH``, then this
Python's own prefix), found without ament or rclpy.

**Values.** :class:`Ros2Codec` encodes a dict (missing fields take their zero value),
a ``rosbags`` message or an rclpy message of the schema's type to CDR (little
endian, XCDR1, as ROS 2 publishes), and decodes CDR to a ``rosbags`` message
(attributes as rclpy's; primitive arrays as numpy arrays). :func:`message_to_dict`
turns one into plain Python values, for printing.

Invariants:

* Nothing here imports :mod:`a0py.proto.schema` (its ``Schema.ros2`` calls here),
  nor rclpy unless the value to encode is already an rclpy message.
* A type name is ``pkg/msg/Name`` or ``pkg/Name``; anything else is ArgumentError.
  A package that is not installed is SchemaError naming the pip package that
  brings it (``ros-kilted-<pkg>``); a type the package lacks is SchemaError naming
  both.
"""

import dataclasses
import os
import re
import struct
import sys
import threading

from ..errors import ArgumentError
from .errors import DecodeError, ExtraNotInstalledError, SchemaError

__all__ = [
    "COMPRESSED_IMAGE", "IMAGE", "SEPARATOR", "Ros2Codec", "compressed_image_cdr", "image_array",
    "image_cdr", "parse_image", "codec_for", "definition_types", "find_definition", "full_definition",
    "interface_text", "is_ros2_message", "message_to_dict", "pip_package", "split_type_name",
    "type_name_of",
]

#: The line between a definition's sections (rosbag2's: 80 ``=``).
SEPARATOR = "=" * 80
#: The ROS 2 distribution whose wheels the pip package names point to.
DISTRO = "kilted"

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SECTION = re.compile(r"^={10,}\s*$", re.MULTILINE)
_WSTRING = re.compile(r"^(\s*)wstring\b", re.MULTILINE)
_lock = threading.Lock()
# The one field of a message type with none (ROS 2 and rosbags add it; always 0).
_EMPTY_MEMBER = "structure_needs_at_least_one_member"
_codecs = {}  # (type name, definition text) -> Ros2Codec


def pip_package(package):
    """The pip package that installs ROS 2 package `package` (``sensor_msgs`` ->
    ``ros-kilted-sensor-msgs``)."""
    return f"ros-{DISTRO}-{package.replace('_', '-')}"


def split_type_name(type_name, kinds=("msg",)):
    """``(pkg, kind, Name)`` of `type_name` (``pkg/msg/Name``, or ``pkg/Name`` for
    the first of `kinds`). Raises ArgumentError for anything else."""
    if not isinstance(type_name, str):
        raise ArgumentError(f"a ROS 2 type name is a str like 'sensor_msgs/msg/Imu', not "
                            f"{type(type_name).__name__}")
    parts = type_name.split("/")
    if len(parts) == 2:
        parts.insert(1, kinds[0])
    if len(parts) != 3 or parts[1] not in kinds or not all(_NAME.match(p) for p in parts):
        raise ArgumentError(f"bad ROS 2 type name {type_name!r}: write 'pkg/{kinds[0]}/Name' "
                            "(e.g. 'sensor_msgs/msg/Imu') or 'pkg/Name'")
    return parts[0], parts[1], parts[2]


def _prefixes():
    found = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for p in (sys.prefix, sys.base_prefix):
        if p not in found:
            found.append(p)
    return found


def interface_text(package, kind, name):
    """The text of ``share/<package>/<kind>/<name>.<kind>`` from the first prefix that
    has the package. Raises SchemaError: the package is not installed (naming the pip
    package to install), or it has no such type."""
    for prefix in _prefixes():
        share = os.path.join(prefix, "share", package)
        if os.path.isdir(share):
            path = os.path.join(share, kind, f"{name}.{kind}")
            try:
                with open(path, encoding="utf-8") as f:
                    return f.read()
            except FileNotFoundError:
                raise SchemaError(f"unknown ROS 2 type {package}/{kind}/{name}: package "
                                  f"{package!r} ({share}) has no {kind}/{name}.{kind}") from None
    raise SchemaError(f"ROS 2 package {package!r} (for {package}/{kind}/{name}) is not installed: "
                      f"pip install {pip_package(package)}")


def _rosbags():
    try:
        from rosbags import typesys
        from rosbags.typesys.base import Nodetype
    except ImportError:
        raise ExtraNotInstalledError("ROS 2 messages need rosbags: pip install 'a0py[ros2]' "
                                     "(or pip install rosbags)") from None
    return typesys, Nodetype


def _parse(text, type_name):
    """rosbags' ``{type: (consts, fields)}`` of one ``.msg`` text; SchemaError if it does
    not parse. rosbags' ``.msg`` parser lacks ``wstring``: such fields read as
    ``string`` here (right for finding dependencies; :class:`Ros2Codec` refuses them)."""
    typesys, _ = _rosbags()
    try:
        return typesys.get_types_from_msg(_WSTRING.sub(r"\1string", text), type_name)
    except Exception as e:  # rosbags' TypesysError, or its parser's own
        raise SchemaError(f"ROS 2 type {type_name}: the definition does not parse ({e})") from None


def _field_types(fields, nodetype):
    """The message types a list of rosbags field definitions refers to, in order."""
    out = []
    for _, (kind, spec) in fields:
        if kind in (nodetype.ARRAY, nodetype.SEQUENCE):
            kind, spec = spec[0]
        if kind == nodetype.NAME:
            out.append(spec)
    return out


def full_definition(type_name, text, load=None):
    """The rosbag2 layout of `type_name` whose own ``.msg`` text is `text`: the text,
    then every type it needs (depth first, each once) loaded by `load(type_name)`
    (default: from the installed packages, :func:`interface_text`)."""
    _, nodetype = _rosbags()
    if load is None:
        def load(dep):
            pkg, kind, name = split_type_name(dep)
            return interface_text(pkg, kind, name)
    sections, seen = [text.rstrip("\n")], {type_name}

    def visit(name, body):
        for dep in _field_types(_parse(body, name)[name][1], nodetype):
            if dep not in seen:
                seen.add(dep)
                dep_text = load(dep)
                pkg, _, short = split_type_name(dep)
                sections.append(f"{SEPARATOR}\nMSG: {pkg}/{short}\n{dep_text.rstrip(chr(10))}")
                visit(dep, dep_text)

    visit(type_name, text)
    return "\n".join(sections) + "\n"


def definition_types(type_name, definition):
    """rosbags' ``{type: (consts, fields)}`` of every section of a full definition.
    Raises SchemaError when a section does not parse or a type it needs is missing."""
    _, nodetype = _rosbags()
    types = {}
    for name, text in _sections(type_name, definition).items():
        types.update(_parse(text, name))
    for name, (_, fields) in types.items():
        missing = [t for t in _field_types(fields, nodetype) if t not in types]
        if missing:
            raise SchemaError(f"ROS 2 type {type_name}: the definition lacks {missing[0]} (needed by "
                              f"{name}); give each type it needs after a line of '=' and "
                              f"'MSG: pkg/Name', as rosbag2 writes it")
    return types


def find_definition(type_name):
    """``(pkg/msg/Name, full definition text)`` of an installed message type. Raises
    ArgumentError (bad name), SchemaError (package missing, naming the pip package;
    unknown type), ExtraNotInstalledError (no rosbags)."""
    pkg, kind, name = split_type_name(type_name)
    canonical = f"{pkg}/{kind}/{name}"
    return canonical, full_definition(canonical, interface_text(pkg, kind, name))


def _sections(type_name, definition):
    """``{type name: its .msg text}`` of a full definition in rosbag2's layout."""
    parts = _SECTION.split(definition)
    out = {type_name: parts[0]}
    for part in parts[1:]:
        body = part.lstrip("\n")
        head, _, rest = body.partition("\n")
        if not head.startswith("MSG: "):
            raise SchemaError(f"ROS 2 type {type_name}: a section of the definition does not start "
                              f"with 'MSG: pkg/Name' ({head[:60]!r})")
        try:
            pkg, kind, name = split_type_name(head[5:].strip())
        except ArgumentError as e:
            raise SchemaError(f"ROS 2 type {type_name}: {e}") from None
        out[f"{pkg}/{kind}/{name}"] = rest
    return out


def is_ros2_message(value):
    """Whether `value` is a rosbags message or an rclpy message (without importing
    either)."""
    cls = type(value)
    if isinstance(getattr(cls, "__msgtype__", None), str):
        return True
    return hasattr(cls, "_fields_and_field_types") and hasattr(type(cls), "__import_type_support__")


def type_name_of(value):
    """``pkg/msg/Name`` of a rosbags or rclpy message."""
    cls = type(value)
    name = getattr(cls, "__msgtype__", None)
    if isinstance(name, str):
        return name
    module = cls.__module__.split(".")  # sensor_msgs.msg._imu
    return f"{module[0]}/{module[1]}/{cls.__name__}"


class Ros2Codec:
    """CDR encoding and decoding of one message type, from its full definition
    (rosbag2's layout). Raises SchemaError when the definition does not parse or lacks
    a type it needs, ExtraNotInstalledError without rosbags."""

    def __init__(self, type_name, definition):
        typesys, self._nodetype = _rosbags()
        self.type_name = type_name
        types = definition_types(type_name, definition)
        if _WSTRING.search(definition):
            raise SchemaError(f"ROS 2 type {type_name} has wstring fields, which a0py does not "
                              "encode or decode (rosbags lacks them); the bridge carries such "
                              "messages as bytes, unchanged")
        store = typesys.get_typestore(typesys.Stores.EMPTY)
        try:
            store.register(types)
            self._msgdef = store.get_msgdef(type_name)  # generates the (de)serializers
        except Exception as e:
            raise SchemaError(f"ROS 2 type {type_name}: the definition is not complete ({e})") from None
        self._store = store

    def decode(self, data, where="a message"):
        """The rosbags message of CDR bytes `data`; DecodeError naming `where`."""
        # Not rosbags' deserialize_cdr: it refuses bytes past the message's end, and
        # Fast DDS's serialized messages of bounded types carry some.
        try:
            header = bytes(data[:4])
            if len(header) < 4 or header[0] != 0 or header[1] not in (0, 1):
                raise ValueError(f"no CDR encapsulation header (got {header.hex() or 'nothing'})")
            read = self._msgdef.deserialize_cdr_le if header[1] else self._msgdef.deserialize_cdr_be
            return read(memoryview(data)[4:], 0, self._msgdef.cls, self._store)[0]
        except Exception as e:  # rosbags raises struct, index, unicode errors alike
            raise DecodeError(f"{where}: not a CDR {self.type_name} ({type(e).__name__}: {e})") from None

    def encode(self, value, where="the message"):
        """CDR bytes of `value`: a dict, a rosbags message or an rclpy message of this
        type. Raises SchemaError (a message of another type), ArgumentError (a dict with
        a field this type lacks, or a value of the wrong kind)."""
        if isinstance(value, dict):
            message = self._from_dict(self.type_name, value, where)
        else:
            name = type_name_of(value)
            if name != self.type_name:
                raise SchemaError(f"{where} carries {self.type_name}; this value is a {name}")
            if not isinstance(getattr(type(value), "__msgtype__", None), str):
                from rclpy.serialization import serialize_message  # an rclpy message: rclpy is here

                return serialize_message(value)
            message = value
        try:
            data = bytes(self._store.serialize_cdr(message, self.type_name))
        except Exception as e:
            raise ArgumentError(f"{where}: cannot encode as {self.type_name} "
                                f"({type(e).__name__}: {e})") from None
        # Padded to a multiple of 4, as Fast DDS delivers a message (ROS 2's readers,
        # rosbags' included, take up to 3 bytes past the end).
        return data + b"\x00" * (-len(data) % 4)

    def _from_dict(self, type_name, values, where):
        fields = self._store.fielddefs[type_name][1]
        unknown = set(values) - {f for f, _ in fields}
        if unknown:
            raise ArgumentError(f"{where}: {type_name} has no field {', '.join(sorted(unknown))} "
                                f"(its fields: {', '.join(f for f, _ in fields)})")
        args = {}
        for fname, (kind, spec) in fields:
            args[fname] = self._value(kind, spec, values.get(fname), f"{where}: {type_name}.{fname}")
        return self._store.types[type_name](**args)

    def _value(self, kind, spec, value, where):
        nt = self._nodetype
        if kind == nt.BASE:
            return _base_value(spec[0], value, where)
        if kind == nt.NAME:
            if value is None:
                value = {}
            if not isinstance(value, dict) and not is_ros2_message(value):
                raise ArgumentError(f"{where} is a {spec}: give a dict, not {type(value).__name__}")
            return self._from_dict(spec, value, where) if isinstance(value, dict) else value
        (elem_kind, elem_spec), size = spec
        if value is None:
            value = [None] * size if kind == nt.ARRAY else []
        if elem_kind == nt.BASE and elem_spec[0] not in ("string", "wstring"):
            np = _numpy()
            dtype = _DTYPES[elem_spec[0]]
            if len(value) and value[0] is None:
                array = np.zeros(len(value), dtype=dtype)
            elif isinstance(value, (bytes, bytearray, memoryview)) and dtype in ("u1", "i1"):
                array = np.frombuffer(value, dtype=dtype)
            else:
                try:
                    array = np.asarray(value, dtype=dtype)
                except (TypeError, ValueError) as e:
                    raise ArgumentError(f"{where}: not an array of {elem_spec[0]} ({e})") from None
            if array.ndim != 1:
                raise ArgumentError(f"{where}: a one-dimensional array of {elem_spec[0]}, not "
                                    f"shape {array.shape}")
            items = array
        else:
            items = [self._value(elem_kind, elem_spec, v, f"{where}[{i}]") for i, v in enumerate(value)]
        if kind == nt.ARRAY and len(items) != size:
            raise ArgumentError(f"{where}: an array of exactly {size}, not {len(items)}")
        if kind == nt.SEQUENCE and size and len(items) > size:
            raise ArgumentError(f"{where}: a sequence of at most {size}, not {len(items)}")
        return items


_DTYPES = {"bool": "?", "byte": "u1", "octet": "u1", "char": "u1", "uint8": "u1", "int8": "i1",
           "uint16": "<u2", "int16": "<i2", "uint32": "<u4", "int32": "<i4", "uint64": "<u8",
           "int64": "<i8", "float32": "<f4", "float64": "<f8"}


def _numpy():
    try:
        import numpy
    except ImportError:
        raise ExtraNotInstalledError("ROS 2 arrays need numpy: pip install 'a0py[ros2]'") from None
    return numpy


def _base_value(type_name, value, where):
    if type_name in ("string", "wstring"):
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ArgumentError(f"{where} is a {type_name}: give a str, not {type(value).__name__}")
        return value
    if type_name == "bool":
        return bool(value) if value is not None else False
    if value is None:
        return 0.0 if type_name.startswith("float") else 0
    if type_name.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentError(f"{where} is a {type_name}: give a number, not {type(value).__name__}")
        return float(value)
    if isinstance(value, (bytes, bytearray)) and len(value) == 1 and type_name in ("byte", "char"):
        value = value[0]  # as rclpy holds a byte
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value.__index__())  # numpy integers
        except AttributeError:
            raise ArgumentError(f"{where} is a {type_name}: give an int, not "
                                f"{type(value).__name__}") from None
    if type_name == "byte" and 128 <= value <= 255:
        value -= 256  # rosbags packs a byte as signed (and reads it back so)
    return value


def codec_for(type_name, definition):
    """The :class:`Ros2Codec` of (`type_name`, `definition` text), one per process."""
    key = (type_name, definition)
    codec = _codecs.get(key)
    if codec is None:
        codec = Ros2Codec(type_name, definition)
        with _lock:
            codec = _codecs.setdefault(key, codec)
    return codec


def message_to_dict(message):
    """Plain Python values of a rosbags message: dicts of fields (in order), lists for
    arrays (numpy arrays too), the rest as they are."""
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        # not the constants (class variables), nor the member rosbags gives an empty type
        return {f.name: message_to_dict(getattr(message, f.name)) for f in dataclasses.fields(message)
                if f.name != _EMPTY_MEMBER}
    if isinstance(message, (list, tuple)):
        return [message_to_dict(v) for v in message]
    if hasattr(message, "tolist"):
        return message.tolist()
    return message


# -- images: sensor_msgs/msg/Image and CompressedImage, laid out by hand (the camera path:
# a view of the pixels with no decoding, and a message built with one copy of them)

#: The ROS 2 image types a0py reads as arrays and the bridge maps Foxglove's images to.
IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")


def _read_string(buf, pos):
    """(text, position after it) of a CDR string at `pos` of `buf` (the message body:
    positions count from after the encapsulation header, as CDR aligns them)."""
    pos = (pos + 3) & ~3
    (n,) = _U32.unpack_from(buf, pos)
    pos += 4
    if n == 0 or pos + n > len(buf):
        raise ValueError(f"a string of {n} bytes at {pos} does not fit")
    return bytes(buf[pos:pos + n - 1]).decode("utf-8"), pos + n


def parse_image(payload, where):
    """``(height, width, encoding, is_bigendian, step, data offset, data size)`` of the
    CDR ``sensor_msgs/msg/Image`` in `payload` (the data offset into `payload`);
    DecodeError when it is not one (little endian, as ROS 2 publishes)."""
    try:
        whole = memoryview(payload).cast("B")
        if len(whole) < 4 or bytes(whole[:2]) != b"\x00\x01":
            raise ValueError("not little-endian CDR")
        buf = whole[4:]
        _, pos = _read_string(buf, 8)
        pos = (pos + 3) & ~3
        height, width = struct.unpack_from("<II", buf, pos)
        encoding, pos = _read_string(buf, pos + 8)
        bigendian = buf[pos]
        pos = (pos + 1 + 3) & ~3
        step, size = struct.unpack_from("<II", buf, pos)
        offset = 4 + pos + 8
        if offset + size > len(whole):
            raise ValueError(f"{size} bytes of data past the message's end")
    except (ValueError, TypeError, struct.error, UnicodeDecodeError, IndexError) as e:
        raise DecodeError(f"{where}: not a CDR {IMAGE} ({e})") from None
    return height, width, encoding, bool(bigendian), step, offset, size


def image_array(payload, where):
    """A read-only pixel array (HxW or HxWxC) over the CDR ``sensor_msgs/msg/Image`` in
    `payload`, with no copy. Raises DecodeError (not an Image, an encoding a0py does
    not read as an array: the encodings of :data:`a0py.proto.arrays.IMAGE_ENCODINGS`,
    or a size that does not add up)."""
    from .arrays import IMAGE_ENCODINGS, numpy

    height, width, encoding, bigendian, step, offset, size = parse_image(payload, where)
    if encoding not in IMAGE_ENCODINGS:
        raise DecodeError(f"{where}: Image encoding {encoding!r} is not one a0py reads as an array "
                          f"({', '.join(IMAGE_ENCODINGS)}); pkt.decode() gives the message")
    np = numpy("reading an image")
    sample, channels = IMAGE_ENCODINGS[encoding]
    dt = np.dtype(sample).newbyteorder(">" if bigendian else "<")
    row = width * channels * dt.itemsize
    if step < row or (height and step * (height - 1) + row > size):
        raise DecodeError(f"{where}: a {width}x{height} {encoding} image with step {step} does "
                          f"not fit its {size} bytes of data")
    shape = (height, width) if channels == 1 else (height, width, channels)
    strides = (step, dt.itemsize) if channels == 1 else (step, channels * dt.itemsize, dt.itemsize)
    return np.ndarray(shape, dt, buffer=payload, offset=offset, strides=strides)


def _cdr_string(text, pos):
    """(padding + length + bytes, new position) of a CDR string written at `pos`."""
    data = text.encode("utf-8") + b"\x00"
    pad = -pos % 4
    return b"\x00" * pad + _U32.pack(len(data)) + data, pos + pad + 4 + len(data)


def _header_cdr(stamp_ns, frame_id):
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    frame, pos = _cdr_string(frame_id, 8)
    return b"\x00\x01\x00\x00" + _STAMP.pack(sec, nanosec) + frame, pos


def image_cdr(stamp_ns, frame_id, height, width, encoding, step, data):
    """``(prefix, data)``: a CDR ``sensor_msgs/msg/Image`` is `prefix` followed by the
    pixel bytes `data` (a bytes-like object, not copied here)."""
    head, pos = _header_cdr(stamp_ns, frame_id)
    pad = -pos % 4
    enc, pos = _cdr_string(encoding, pos + pad + 8)
    mid = b"\x00" * pad + struct.pack("<II", height, width) + enc
    pad2 = -(pos + 1) % 4
    tail = b"\x00" + b"\x00" * pad2 + struct.pack("<II", step, memoryview(data).nbytes)
    return head + mid + tail, data


def compressed_image_cdr(stamp_ns, frame_id, format, data):
    """``(prefix, data)``: a CDR ``sensor_msgs/msg/CompressedImage`` is `prefix` then
    the compressed bytes `data`."""
    head, pos = _header_cdr(stamp_ns, frame_id)
    fmt, pos = _cdr_string(format, pos)
    pad = -pos % 4
    return head + fmt + b"\x00" * pad + _U32.pack(memoryview(data).nbytes), data
