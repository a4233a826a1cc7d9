"""Recordings named by a path spec: a file, a directory of recordings, a
rosbag2 bag, a glob, a live topic (``shm://TOPIC``), or a list of them,
expanded into the files to read, each once, in a stable order."""

from __future__ import annotations

import glob
import os

from . import rosbag2
from .errors import RecordingOptionError

SHM_PREFIX = "shm://"  # a live topic in a path spec (read by the Spark source, skipped by replay)


def _directory_sources(directory):
    """The MCAP files under ``directory``: each rosbag2 bag's files in its
    metadata's order (a bag's subtree is its own), other ``.mcap`` files by
    name; bags and files sorted together by path."""
    if rosbag2.is_bag(directory):
        return rosbag2.bag_files(directory)
    units = []  # (sort key, [files])
    for d, dirs, fs in os.walk(directory):
        bags = [x for x in dirs if rosbag2.is_bag(os.path.join(d, x))]
        for b in bags:
            units.append((os.path.join(d, b), rosbag2.bag_files(os.path.join(d, b))))
        dirs[:] = sorted(x for x in dirs if x not in bags)
        units += [(os.path.join(d, f), [os.path.join(d, f)]) for f in fs if f.endswith(".mcap")]
    units.sort(key=lambda u: u[0])
    return [f for _, files in units for f in files]


def expand_paths(spec):
    """The sources named by ``spec`` (a path, a directory, a rosbag2 bag
    directory, a glob, a ``shm://TOPIC``, or a list of them), each once:
    a file as given; a directory's ``.mcap`` files sorted by path, where each
    rosbag2 bag (a directory with rosbag2's ``metadata.yaml``, the directory
    itself or one below it) gives its MCAP files in its metadata's order; a
    bag's ``metadata.yaml`` named alone stands for its bag. ``shm://`` names
    are passed through for the readers of live topics.

    Raises :class:`RecordingOptionError` when a name matches nothing, and
    :class:`RecordingFormatError` (from :func:`a0py.recording.rosbag2.bag_files`)
    naming a bag a0py cannot read: sqlite3 storage, compressed files or
    messages, files missing, metadata that does not parse."""
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    out = []
    seen = set()
    for item in items:
        item = os.fspath(item)
        if item.startswith(SHM_PREFIX):
            found = [item]
        elif os.path.isdir(item):
            found = _directory_sources(item)
        elif os.path.basename(item) == rosbag2.METADATA_FILE and rosbag2.is_bag(os.path.dirname(item) or "."):
            found = rosbag2.bag_files(os.path.dirname(item) or ".")
        elif os.path.exists(item):
            found = [item]
        elif glob.has_magic(item):
            found = []
            for p in sorted(glob.glob(item, recursive=True)):
                if os.path.isfile(p):
                    found.append(p)
                elif os.path.isdir(p) and rosbag2.is_bag(p):
                    found += rosbag2.bag_files(p)
            if not found:
                raise RecordingOptionError(f"{item}: the pattern matches no file")
        else:
            raise RecordingOptionError(f"{item}: no such file or directory (a recording, a directory of "
                                       f"recordings, a rosbag2 bag, a glob, a file arena or shm://TOPIC)")
        for f in found:
            key = f if f.startswith(SHM_PREFIX) else os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out
