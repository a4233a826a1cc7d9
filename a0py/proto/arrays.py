"""numpy arrays and raw images as typed payloads, written with one copy and read with
none.

An array topic's messages are ``a0py.NDArray`` protobuf messages (dtype, shape,
strides, data: :mod:`a0py.proto.protobuf_wire` has the schema), an image topic's are
Foxglove's ``foxglove.RawImage``. Both are written as a few bytes of fields, a padding
field, then the array's bytes, 16-byte aligned, copied once from the array into the
frame; a reader views those bytes in place as a read-only array.

Invariants:

* **Only what reads back exactly is written.** Arrays of booleans, integers, floats
  and complex numbers (numpy kinds ``b``, ``i``, ``u``, ``f``, ``c``), contiguous in C
  or Fortran order; anything else (objects, strings, records, datetimes; a strided
  view) is an ArgumentError before anything is published.
* **Nothing read is trusted.** A payload's dtype, shape and strides are checked
  (dtype of the kinds above, shape and strides of a contiguous array whose bytes are
  exactly the data field) before numpy sees them: a hostile payload is a DecodeError,
  never a view outside the payload.
* numpy is imported on first use (ExtraNotInstalledError naming the extra without it).
"""

import math
import struct
import time

from ..errors import ArgumentError
from . import protobuf_wire as wire
from .errors import DecodeError, ExtraNotInstalledError

__all__ = [
    "IMAGE_ENCODINGS", "RAW_IMAGE_NAME", "array_prefix", "body_of", "check_array", "check_image",
    "compressed_image_prefix", "image_encoding_for", "image_pixels", "image_prefix", "numpy",
    "pixel_view",
    "array_viewer", "compiled_module", "packet_arrays", "parse_array_prefix", "view_array",
]

RAW_IMAGE_NAME = "foxglove.RawImage"

#: RawImage encodings a0py reads and writes as arrays: encoding -> (numpy dtype,
#: channels). 16- and 32-bit samples are little-endian (Foxglove's RawImage has no
#: byte-order field).
IMAGE_ENCODINGS = {
    "mono8": ("u1", 1), "8UC1": ("u1", 1), "8UC3": ("u1", 3), "8UC4": ("u1", 4),
    "rgb8": ("u1", 3), "bgr8": ("u1", 3), "rgba8": ("u1", 4), "bgra8": ("u1", 4),
    "mono16": ("<u2", 1), "16UC1": ("<u2", 1), "32FC1": ("<f4", 1),
    "uyvy": ("u1", 2), "yuyv": ("u1", 2), "yuv422": ("u1", 2), "yuv422_yuy2": ("u1", 2),
    "bayer_rggb8": ("u1", 1), "bayer_bggr8": ("u1", 1), "bayer_gbrg8": ("u1", 1),
    "bayer_grbg8": ("u1", 1),
}

_KINDS = "biufc"
_MAX_DIMS = 32  # numpy's own limit (NPY_MAXDIMS is 32 or 64): anything more is hostile

# RawImage fields (foxglove/RawImage.proto): timestamp 1 (google.protobuf.Timestamp:
# seconds 1, nanos 2), width 2, height 3 (fixed32), encoding 4, step 5 (fixed32),
# data 6, frame_id 7.
_IMG_TIMESTAMP, _IMG_WIDTH, _IMG_HEIGHT, _IMG_ENCODING, _IMG_STEP, _IMG_DATA, _IMG_FRAME = range(1, 8)
# a0py.NDArray fields
_ND_DTYPE, _ND_SHAPE, _ND_STRIDES, _ND_DATA = 1, 2, 3, 4


def numpy(what="reading arrays"):
    """The numpy module, or ExtraNotInstalledError naming the extra."""
    try:
        import numpy
    except ImportError:
        raise ExtraNotInstalledError(f"{what} needs numpy: pip install 'a0py[typed]' "
                                     "(or pip install numpy)") from None
    return numpy


def check_array(array, topic_name):
    """Raises ArgumentError (naming the topic) unless `array` can be published: a
    supported dtype, contiguous (C or Fortran order)."""
    dtype = array.dtype
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ArgumentError(
            f"topic {topic_name!r}: arrays of dtype {dtype} cannot be published (booleans, "
            "integers, floats and complex numbers can: convert it, e.g. a.astype(np.float64))")
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise ArgumentError(
            f"topic {topic_name!r}: the array is not contiguous (a strided view, shape "
            f"{array.shape}, strides {array.strides}); publish np.ascontiguousarray(a), a copy")


def array_prefix(array):
    """The bytes of an ``a0py.NDArray`` message before the array's own bytes."""
    dtype = array.dtype.str.encode("ascii")
    # numpy lets a contiguous array have any stride on a dimension of length 1: the
    # message carries the canonical strides of its order, which readers check.
    c_order, f_order = _contiguous_strides(array.shape, array.dtype.itemsize)
    head = (wire.length_delimited(_ND_DTYPE, dtype)
            + wire.packed_varints(_ND_SHAPE, array.shape)
            + wire.packed_varints(_ND_STRIDES, c_order if array.flags.c_contiguous else f_order))
    return wire.aligned_prefix(head, _ND_DATA, array.nbytes)


def body_of(array):
    """`array`'s bytes in memory order, as an object the writer copies with one
    memcpy (a C-contiguous view of the same memory)."""
    return array if array.flags.c_contiguous else array.T


def _contiguous_strides(shape, itemsize):
    c, f = [], []
    step = itemsize
    for n in reversed(shape):
        c.append(step)
        step *= max(n, 1)
    step = itemsize
    for n in shape:
        f.append(step)
        step *= max(n, 1)
    return tuple(reversed(c)), tuple(f)


def parse_array_prefix(buf, where):
    """``(dtype str, shape, strides, data begin, data end)`` of the ``a0py.NDArray``
    message in `buf`, checked; DecodeError naming `where` otherwise."""
    dtype = shape = strides = data = None
    try:
        for number, wire_type, value, _at in wire.fields(buf):
            if wire_type != wire.LENGTH:
                continue
            if number == _ND_DTYPE:
                dtype = bytes(buf[value[0]:value[1]]).decode("ascii")
            elif number == _ND_SHAPE:
                shape = wire.unpack_varints(buf, *value)
            elif number == _ND_STRIDES:
                strides = wire.unpack_varints(buf, *value)
            elif number == _ND_DATA:
                data = value
    except (ValueError, UnicodeDecodeError) as e:
        raise DecodeError(f"{where}: not an a0py.NDArray message ({e})") from None
    if dtype is None or data is None:
        raise DecodeError(f"{where}: not an a0py.NDArray message (no {'dtype' if dtype is None else 'data'})")
    np = numpy("reading an array")
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise DecodeError(f"{where}: dtype {dtype!r} is not a numpy dtype") from None
    if dt.kind not in _KINDS or dt.fields is not None or dt.subdtype is not None:
        raise DecodeError(f"{where}: dtype {dtype!r} is not one a0py publishes")
    shape = tuple(shape or ())
    if len(shape) > _MAX_DIMS:
        raise DecodeError(f"{where}: {len(shape)} dimensions")
    strides = tuple(s - (1 << 64) if s >= 1 << 63 else s for s in (strides or ()))
    size = math.prod(shape) * dt.itemsize
    if size != data[1] - data[0]:
        raise DecodeError(f"{where}: shape {shape} of {dtype} needs {size} bytes, "
                          f"the data field holds {data[1] - data[0]}")
    c_order, f_order = _contiguous_strides(shape, dt.itemsize)
    if not strides:
        strides = c_order
    elif strides not in (c_order, f_order) and size:
        raise DecodeError(f"{where}: strides {strides} are not those of a contiguous array of "
                          f"shape {shape}")
    if len(strides) != len(shape):
        raise DecodeError(f"{where}: {len(strides)} strides for {len(shape)} dimensions")
    return dt, shape, strides, data[0], data[1]


def view_array(buf, parsed):
    """A read-only array over ``buf`` (bytes or a read-only memoryview) as `parsed`
    (from :func:`parse_array_prefix`) says."""
    np = numpy("reading an array")
    dt, shape, strides, begin, _end = parsed
    return np.ndarray(shape, dt, buffer=buf, offset=begin, strides=strides)


def array_viewer(payload, parsed):
    """A function of a payload that views it as `parsed` (from
    :func:`parse_array_prefix` of `payload`, whose data ends it) says, or gives
    None for a payload whose bytes before the data or whose size differ from
    `payload`'s: the compiled :class:`a0py.proto._ndarray.ArrayViewer` where it is
    built, else numpy's ``frombuffer``."""
    np = numpy("reading an array")
    dt, shape, strides, begin, end = parsed
    header, size = bytes(payload[:begin]), end
    compiled = compiled_module()
    if compiled is not None:
        return compiled.ArrayViewer(header, size, dt, shape, strides).view
    count = (end - begin) // dt.itemsize if dt.itemsize else 0
    frombuffer = np.frombuffer
    if len(shape) == 1:
        make = lambda payload: frombuffer(payload, dt, count, begin)  # noqa: E731
    elif count == 0 or len(shape) == 0 or strides != _contiguous_strides(shape, dt.itemsize)[0]:
        make = lambda payload: view_array(payload, parsed)  # noqa: E731
    else:
        make = lambda payload: frombuffer(payload, dt, count, begin).reshape(shape)  # noqa: E731

    def view(payload):
        if len(payload) == size and payload[:begin] == header:
            return make(payload)
        return None
    return view


def packet_arrays():
    """A compiled ``pkt.array()`` hook (:class:`a0py.proto._ndarray.PacketArrays`,
    its ``viewer`` set by the caller), or None where the compiled module is not
    built."""
    compiled = compiled_module()
    return None if compiled is None else compiled.PacketArrays()


_compiled = []  # [the a0py.proto._ndarray module, or None], once looked for


def compiled_module():
    """:mod:`a0py.proto._ndarray`, or None where it is not built (no numpy at build
    time): imported on first use, as numpy is (ExtraNotInstalledError without
    numpy)."""
    if not _compiled:
        numpy("reading an array")
        try:
            from . import _ndarray
        except ImportError:
            _ndarray = None
        _compiled.append(_ndarray)
    return _compiled[0]


# -- images (foxglove.RawImage)


def image_encoding_for(array, topic_name):
    """The RawImage encoding of an image array by its dtype and shape (HxW, HxWx1,
    HxWx3, HxWx4 of uint8; HxW of uint16 or float32); ArgumentError otherwise."""
    shape, kind = array.shape, array.dtype.str.lstrip("<|=")
    channels = 1 if len(shape) == 2 else (shape[2] if len(shape) == 3 else None)
    table = {("u1", 1): "mono8", ("u1", 3): "rgb8", ("u1", 4): "rgba8",
             ("u2", 1): "mono16", ("f4", 1): "32FC1"}
    found = table.get((kind, channels))
    if found is None or (array.dtype.itemsize > 1 and array.dtype.byteorder == ">"):
        raise ArgumentError(
            f"topic {topic_name!r}: an image array of shape {shape} and dtype {array.dtype} has "
            "no RawImage encoding a0py infers (HxW, HxWx3 or HxWx4 of uint8; HxW of uint16 "
            "or float32): give encoding=")
    return found


def check_image(array, encoding, topic_name):
    """(height, width, step) of `array` as an image of `encoding`; ArgumentError if it
    does not fit it."""
    if encoding not in IMAGE_ENCODINGS:
        raise ArgumentError(f"topic {topic_name!r}: image encoding {encoding!r} is not one of "
                            f"{', '.join(IMAGE_ENCODINGS)}")
    sample, channels = IMAGE_ENCODINGS[encoding]
    np = numpy("publishing an image")
    want = (array.ndim == 2 and channels == 1) or (array.ndim == 3 and array.shape[2] == channels)
    if not want or array.dtype.newbyteorder("<") != np.dtype(sample).newbyteorder("<") or \
            (array.dtype.itemsize > 1 and array.dtype.byteorder == ">"):
        raise ArgumentError(
            f"topic {topic_name!r}: a {encoding} image is an HxW{'' if channels == 1 else f'x{channels}'} "
            f"array of {np.dtype(sample)}, not shape {array.shape} of {array.dtype}")
    if not array.flags.c_contiguous:
        raise ArgumentError(f"topic {topic_name!r}: the image array is not C-contiguous (shape "
                            f"{array.shape}, strides {array.strides}); publish "
                            "np.ascontiguousarray(a), a copy")
    height, width = array.shape[:2]
    return height, width, width * channels * array.dtype.itemsize


def image_prefix(height, width, step, encoding, data_size, frame_id="", timestamp_ns=None):
    """The bytes of a ``foxglove.RawImage`` message before its pixel bytes."""
    head = _timestamp_field(_IMG_TIMESTAMP, timestamp_ns)
    if frame_id:
        head += wire.length_delimited(_IMG_FRAME, frame_id.encode("utf-8"))
    head += (wire.key(_IMG_WIDTH, wire.FIXED32) + struct.pack("<I", width)
             + wire.key(_IMG_HEIGHT, wire.FIXED32) + struct.pack("<I", height)
             + wire.length_delimited(_IMG_ENCODING, encoding.encode("ascii"))
             + wire.key(_IMG_STEP, wire.FIXED32) + struct.pack("<I", step))
    return wire.aligned_prefix(head, _IMG_DATA, data_size)


def image_pixels(buf, where):
    """A read-only pixel array (HxW, or HxWxC) over the ``foxglove.RawImage`` message in
    `buf`, with no copy; DecodeError if it is not one a0py reads (the encodings of
    :data:`IMAGE_ENCODINGS`)."""
    width = height = step = 0
    encoding = ""
    data = None
    try:
        for number, wire_type, value, _at in wire.fields(buf):
            if number == _IMG_WIDTH and wire_type == wire.FIXED32:
                width = value
            elif number == _IMG_HEIGHT and wire_type == wire.FIXED32:
                height = value
            elif number == _IMG_STEP and wire_type == wire.FIXED32:
                step = value
            elif number == _IMG_ENCODING and wire_type == wire.LENGTH:
                encoding = bytes(buf[value[0]:value[1]]).decode("utf-8")
            elif number == _IMG_DATA and wire_type == wire.LENGTH:
                data = value
    except (ValueError, UnicodeDecodeError) as e:
        raise DecodeError(f"{where}: not a foxglove.RawImage message ({e})") from None
    begin, end = data if data is not None else (0, 0)
    return pixel_view(buf, begin, end - begin, height, width, step, encoding, f"{where}: RawImage")


def pixel_view(buf, offset, size, height, width, step, encoding, where, bigendian=False):
    """A read-only pixel array (HxW, or HxWxC) over the `size` bytes of image data at
    `offset` in `buf`, rows `step` bytes apart, with no copy: how a RawImage and a ROS 2
    Image read. DecodeError (naming `where`) for an encoding a0py does not read as an
    array (:data:`IMAGE_ENCODINGS`) or a size that does not add up."""
    if encoding not in IMAGE_ENCODINGS:
        raise DecodeError(f"{where} encoding {encoding!r} is not one a0py reads as an array "
                          f"({', '.join(IMAGE_ENCODINGS)}); pkt.decode() gives the message")
    np = numpy("reading an image")
    sample, channels = IMAGE_ENCODINGS[encoding]
    dt = np.dtype(sample).newbyteorder(">" if bigendian else "<")
    row = width * channels * dt.itemsize
    if step < row or (height and step * (height - 1) + row > size):
        raise DecodeError(f"{where}: a {width}x{height} {encoding} image with step {step} does not "
                          f"fit its {size} bytes of data")
    shape = (height, width) if channels == 1 else (height, width, channels)
    strides = (step, dt.itemsize) if channels == 1 else (step, channels * dt.itemsize, dt.itemsize)
    return np.ndarray(shape, dt, buffer=buf, offset=offset, strides=strides)


def _timestamp_field(number, timestamp_ns):
    if timestamp_ns is None:
        timestamp_ns = time.time_ns()
    seconds, nanos = divmod(int(timestamp_ns), 1_000_000_000)
    stamp = wire.key(1, wire.VARINT) + wire.varint(seconds)
    if nanos:
        stamp += wire.key(2, wire.VARINT) + wire.varint(nanos)
    return wire.length_delimited(number, stamp)


# CompressedImage fields (foxglove/CompressedImage.proto): timestamp 1, data 2,
# format 3, frame_id 4.
def compressed_image_prefix(format, data_size, frame_id="", timestamp_ns=None):
    """The bytes of a ``foxglove.CompressedImage`` message before its image bytes."""
    head = _timestamp_field(1, timestamp_ns)
    if frame_id:
        head += wire.length_delimited(4, frame_id.encode("utf-8"))
    head += wire.length_delimited(3, format.encode("ascii"))
    return wire.aligned_prefix(head, 2, data_size)
