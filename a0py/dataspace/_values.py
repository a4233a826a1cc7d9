"""What every dataspace module agrees a value is (docs/dataspace.md, "Values").

This module sits at the bottom of the package: it imports nothing of it, so
the codec, the text syntax and both builds of the index take these names
from here.
"""

# How deep a value or pattern may nest: each record, tuple or list (and in a
# pattern each capture) is one level, an atom none; ``(1,)`` is 1 deep. It is
# the byte encoding's limit, and Record, the index, patterns, hashing and
# equality enforce it alike (docs/dataspace.md, "Nesting limit").
MAX_DEPTH = 256

# Tuples are the records of this reserved label (a 2-tuple's class is "/2").
TUPLE_LABEL = ""


def is_record(v) -> bool:
    """True when ``v`` is a Record of either build (compiled or interpreted).

    Each build has its own Record class, and this module cannot import
    either (they are above it), so a Record is recognised by its class name
    and its two attributes.
    """
    return type(v).__name__ == "Record" and hasattr(v, "label") and hasattr(v, "fields")
