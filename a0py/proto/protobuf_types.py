"""Protobuf schemas through the protobuf package (imported on first use): the
FileDescriptorSet of a message class, the message class of a schema, and the
comparison of two descriptor sets.

A ``protobuf`` schema's data is a binary FileDescriptorSet holding the message's file
and every file it imports (MCAP's convention, and what Foxglove reads). Decoding
builds the message class from that set, in a pool of its own, so a reader needs no
generated code; when the process has the same type loaded (the user's own generated
module, Foxglove's ``foxglove_schemas_protobuf``), that class is used instead, so
decoded messages are instances of it.
"""

import threading

from ..errors import ArgumentError
from .errors import ExtraNotInstalledError, SchemaError

__all__ = [
    "canonical_descriptor_set", "descriptor_set_of", "is_message", "message_class",
    "message_descriptor", "message_fields", "require_protobuf", "schema_parts_of",
]

_lock = threading.Lock()
_classes = {}      # (name, data) -> message class
_descriptors = {}  # (name, data) -> Descriptor
_canonical = {}    # data -> canonical bytes


def require_protobuf(what):
    """Imports the protobuf package, or raises ExtraNotInstalledError saying that
    `what` needs it."""
    try:
        import google.protobuf  # noqa: F401
        from google.protobuf import descriptor_pb2  # noqa: F401
    except ImportError:
        raise ExtraNotInstalledError(
            f"{what} needs the protobuf package: pip install 'a0py[typed]' "
            "(or pip install protobuf)") from None


def is_message(value):
    """Whether `value` is a protobuf message (without importing protobuf if it was not)."""
    import sys

    module = sys.modules.get("google.protobuf.message")
    return module is not None and isinstance(value, module.Message)


def _files_of(file_descriptor):
    """The file and every file it imports, imports first, each once."""
    order, seen = [], set()

    def visit(fd):
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            visit(dep)
        order.append(fd)

    visit(file_descriptor)
    return order


def descriptor_set_of(descriptor):
    """The FileDescriptorSet (bytes) of message `descriptor`'s file and its imports."""
    from google.protobuf import descriptor_pb2

    out = descriptor_pb2.FileDescriptorSet()
    for fd in _files_of(descriptor.file):
        fd.CopyToProto(out.file.add())
    return out.SerializeToString(deterministic=True)


def canonical_descriptor_set(data):
    """`data` (a FileDescriptorSet) in a form that two generators of the same
    definitions agree on: files sorted by name, without ``json_name`` fields and
    source comments (neither changes the wire format). `data` itself if it does not
    parse (then it equals only itself)."""
    cached = _canonical.get(data)
    if cached is not None:
        return cached
    require_protobuf("comparing protobuf schemas")
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except DecodeError:
        return data

    def strip(message):
        for field in message.field:
            field.ClearField("json_name")
        for nested in message.nested_type:
            strip(nested)

    files = sorted(fds.file, key=lambda f: f.name)
    out = descriptor_pb2.FileDescriptorSet()
    for f in files:
        copy = out.file.add()
        copy.CopyFrom(f)
        copy.ClearField("source_code_info")
        for message in copy.message_type:
            strip(message)
    result = out.SerializeToString(deterministic=True)
    with _lock:
        _canonical[data] = result
    return result


def _pool_of(schema, where):
    """A descriptor pool holding `schema`'s files (SchemaError if they do not parse or
    do not fit together)."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message import DecodeError

    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(schema.data)
    except DecodeError as e:
        raise SchemaError(f"{where}protobuf schema {schema.name!r}: its data is not a "
                          f"FileDescriptorSet ({e})") from None
    files = {f.name: f for f in fds.file}
    pool = descriptor_pool.DescriptorPool()
    added = set()

    def add(name, chain):
        if name in added:
            return
        if name in chain:
            raise SchemaError(f"{where}protobuf schema {schema.name!r}: files import each other "
                              f"in a cycle ({' -> '.join((*chain, name))})")
        f = files.get(name)
        if f is None:
            raise SchemaError(f"{where}protobuf schema {schema.name!r}: file {chain[-1]!r} imports "
                              f"{name!r}, which the FileDescriptorSet lacks")
        for dep in f.dependency:
            add(dep, (*chain, name))
        try:
            pool.Add(f)
        except Exception as e:  # TypeError/ValueError from the pool, by implementation
            raise SchemaError(f"{where}protobuf schema {schema.name!r}: file {name!r} does not "
                              f"load ({e})") from None
        added.add(name)

    for name in files:
        add(name, ())
    return pool


def message_descriptor(schema, where=""):
    """The Descriptor of `schema`'s message (its name, in its FileDescriptorSet).
    Raises SchemaError if the set does not parse or lacks the message;
    ExtraNotInstalledError without protobuf."""
    key = (schema.name, schema.data)
    found = _descriptors.get(key)
    if found is not None:
        return found
    require_protobuf(f"{where}the protobuf schema {schema.name!r}")
    pool = _pool_of(schema, where)
    try:
        descriptor = pool.FindMessageTypeByName(schema.name)
    except KeyError:
        raise SchemaError(f"{where}protobuf schema {schema.name!r}: its FileDescriptorSet does "
                          f"not define a message of that name") from None
    with _lock:
        _descriptors[key] = descriptor
    return descriptor


def message_class(schema, where=""):
    """The message class that decodes `schema`'s messages: the process's own class of
    that name if it has one with the same definition, else one built from the
    schema. Raises as :func:`message_descriptor`."""
    key = (schema.name, schema.data)
    cls = _classes.get(key)
    if cls is not None:
        return cls
    descriptor = message_descriptor(schema, where)
    from google.protobuf import descriptor_pool, message_factory

    try:
        own = descriptor_pool.Default().FindMessageTypeByName(schema.name)
    except KeyError:
        own = None
    if own is not None and canonical_descriptor_set(descriptor_set_of(own)) == \
            canonical_descriptor_set(schema.data):
        descriptor = own
    cls = message_factory.GetMessageClass(descriptor)
    with _lock:
        _classes[key] = cls
    return cls


def schema_parts_of(message):
    """(name, FileDescriptorSet bytes) of protobuf `message`'s type."""
    if not is_message(message):
        raise ArgumentError(f"not a protobuf message: {type(message).__name__}")
    descriptor = type(message).DESCRIPTOR
    return descriptor.full_name, descriptor_set_of(descriptor)


def message_fields(message, bytes_shown=16):
    """`message` as plain data for display: a dict of its set fields (nested messages
    as dicts, enums by name, repeated fields as lists), bytes fields longer than
    `bytes_shown` as ``"<N bytes>"`` (an image's pixels are not text)."""
    from google.protobuf.descriptor import FieldDescriptor

    def value_of(field, value):
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            return message_fields(value, bytes_shown)
        if field.type == FieldDescriptor.TYPE_ENUM:
            named = field.enum_type.values_by_number.get(value)
            return named.name if named is not None else value
        if field.type == FieldDescriptor.TYPE_BYTES:
            return value.hex() if len(value) <= bytes_shown else f"<{len(value)} bytes>"
        return value

    out = {}
    for field, value in message.ListFields():
        repeated = getattr(field, "is_repeated", None)
        if repeated is None:
            repeated = field.label == FieldDescriptor.LABEL_REPEATED
        if repeated and not (field.type == FieldDescriptor.TYPE_MESSAGE
                             and field.message_type.GetOptions().map_entry):
            out[field.name] = [value_of(field, v) for v in value]
        elif repeated:  # a map
            out[field.name] = {k: (message_fields(v, bytes_shown) if hasattr(v, "ListFields") else v)
                               for k, v in value.items()}
        else:
            out[field.name] = value_of(field, value)
    return out
