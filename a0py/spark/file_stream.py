"""``spark.readStream.format("a0").load(PATH)``: recordings as a Spark stream.

    (spark.readStream.format("a0")
        .option("maxFilesPerTrigger", 10)         # optional
        .load("recordings/"))                     # a directory, a glob, a rosbag2 bag, files

Each micro-batch reads the recordings that were finished since the last
one, with the same planner and reader as the batch read
(:mod:`.planning`, :mod:`.part_reader`), so a file gives the same rows
and columns in a stream as in ``spark.read`` (MCAP columns, ``decode=true``
included). The path is listed with :func:`a0py.recording.reader.expand_paths`
at each trigger: a directory's ``.mcap`` files and rosbag2 bags, a glob
(one that matches nothing yet is empty, not an error), named files.

Invariants:

* **A file is read once it is finished**: it ends with MCAP's footer
  record and closing magic, which every MCAP writer writes last, when it
  closes the file (a0py's recorder when it rotates or stops; ``cp`` and
  the like write the tail last too). A file without them is being written
  and is left for a later trigger, so no file is read half. A file no
  writer will finish (a recorder that was killed leaves its last segment
  so) is read, up to its last whole chunk, once option
  ``readUnfinishedAfter`` (seconds) is given and its modification time is
  at least that old; without the option it is never read (a warning says
  so once).
* **Offsets** are the set of files read so far with their sizes, sorted,
  zlib-compressed and base64-encoded (``{"files": N, "read": "..."}``):
  a function of the set alone, so a query restarted from its checkpoint
  replays the same batch, reads no file twice and misses none, including
  files that appear late with an old modification time. About 10 bytes a
  file (the names compress well): thousands of files stay small.
* A micro-batch from ``start`` to ``end`` reads the files of ``end`` not
  in ``start``, oldest modification time first, planned into partitions
  as the batch read plans them.
* A file read before that later changes size is logged as a warning and
  not read again; a file of a batch that no longer exists when the batch
  runs is skipped with a warning (the way out of a damaged file: move it
  away and restart the query).
* A damaged file fails the batch with the reader's
  :class:`RecordingFormatError` naming the file and the byte.
* ``maxFilesPerTrigger`` bounds the files of one batch;
  ``Trigger.AvailableNow`` reads the files finished when the query starts,
  over as many batches as that limit needs, then stops.
* ``decode=true``: the ``message`` type is fixed when the query starts
  (from the files then present, or the schema given with ``.schema()``);
  a later file whose selected channels have another type fails its batch
  with an error naming the file.
"""

from __future__ import annotations

import base64
import glob
import logging
import os
import time
import zlib

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from ..recording.errors import RecordingFormatError, RecordingOptionError
from ..recording.format import FOOTER_BODY, FOOTER_RECORD, MAGIC
from ..recording.reader import SHM_PREFIX, expand_paths
from .options import int_option, lower_keys, read_options
from .part_reader import read_part
from .planning import Part, message_types, plan
from .predicate import Predicate

_log = logging.getLogger("a0py.spark")
_FOOTER_OPCODE = 0x02


class FilesPartition(InputPartition):
    """One planned :class:`a0py.spark.planning.Part` of a micro-batch's files."""

    def __init__(self, index, part):
        super().__init__(index)
        self.part = part


def encode_files(files):
    """The offset of the set ``files`` (path -> size): deterministic."""
    text = "\n".join(f"{files[p]}\t{p}" for p in sorted(files))
    packed = base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")
    return {"files": len(files), "read": packed}


def decode_files(offset):
    """The set of files (path -> size) of an offset made by :func:`encode_files`.

    Raises :class:`RecordingOptionError` for an offset that is not one (a
    checkpoint of another source, or of the live-topics stream)."""
    try:
        text = zlib.decompress(base64.b64decode(offset["read"])).decode("utf-8")
        out = {}
        for line in filter(None, text.split("\n")):
            size, path = line.split("\t", 1)
            out[path] = int(size)
    except (KeyError, TypeError, ValueError, zlib.error) as e:
        raise RecordingOptionError(f"the checkpoint's offset {str(offset)[:120]!r} is not one of the a0 source's "
                                   f"streams of recordings ({e}): was the checkpoint written by a stream of live "
                                   "topics, or another source? Start from a new checkpoint") from None
    if len(out) != offset.get("files"):
        raise RecordingOptionError(f"the checkpoint's offset says {offset.get('files')} files and holds {len(out)}")
    return out


def is_finished(path, size):
    """Does the file end with an MCAP footer record and the closing magic
    (what a writer writes last, when it closes the file)?"""
    tail_len = FOOTER_RECORD + len(MAGIC)
    if size < len(MAGIC) + tail_len:
        return False
    with open(path, "rb") as f:
        f.seek(size - tail_len)
        tail = f.read(tail_len)
    return (len(tail) == tail_len and tail[-len(MAGIC):] == MAGIC and tail[0] == _FOOTER_OPCODE
            and int.from_bytes(tail[1:9], "little") == FOOTER_BODY)


def _check_mcap_head(path, size):
    """Raises :class:`RecordingFormatError` for a file whose first bytes are
    not MCAP's magic (nothing a writer finishes later can mend that)."""
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
    if size >= len(MAGIC) and head != MAGIC:
        raise RecordingFormatError(f"{path}: does not start with the MCAP magic (found {head!r}): not an MCAP "
                                   "recording, so the a0 stream of recordings cannot read it (move it out of "
                                   "the path)")


def list_files(paths):
    """The files the stream's path names now (see the module docstring): a
    glob that matches nothing is no file yet.

    Raises :class:`RecordingOptionError` for a ``shm://`` name among them
    and a path (not a glob) that does not exist."""
    out = []
    for p in paths:
        p = os.fspath(p)
        if p.startswith(SHM_PREFIX):
            raise RecordingOptionError(f"{p}: a stream reads either recordings (paths) or live topics (shm:// "
                                       "names, or option topics without a path), not both")
        if glob.has_magic(p) and not os.path.exists(p) and not glob.glob(p, recursive=True):
            continue
        out.extend(os.path.abspath(f) for f in expand_paths(p))
    return out


class A0FileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream of a path's recordings: see the module docstring."""

    def __init__(self, paths, options, schema):
        low = lower_keys(options)
        self.paths = list(paths)
        self.options = read_options(options, schema)
        self.predicate = Predicate()
        topics = [t.strip() for t in str(low.get("topics") or "").split(",") if t.strip()]
        if topics:
            self.predicate = self.predicate.and_topics(topics)
        self.max_files = int_option(low, "maxfilespertrigger", None)
        age = low.get("readunfinishedafter")
        self.unfinished_after = None
        if age is not None:
            try:
                self.unfinished_after = float(str(age).strip())
            except ValueError:
                self.unfinished_after = -1.0
            if not self.unfinished_after >= 0:
                raise RecordingOptionError(f"option readUnfinishedAfter={age!r}: use a number of seconds (0 or more)")
        self.target = None  # AvailableNow: the files finished when the query started
        self._warned = set()
        self._last = (None, {})  # the last offset decoded, and its set

    def __getstate__(self):
        # The executors need the read options only: not the driver's caches.
        state = dict(self.__dict__)
        state["_warned"] = set()
        state["_last"] = (None, {})
        return state

    def _read_set(self, offset):
        key = offset.get("read")
        if self._last[0] != key:
            self._last = (key, decode_files(offset))
        return self._last[1]

    def _warn_once(self, key, msg, *args):
        if key not in self._warned:
            self._warned.add(key)
            _log.warning(msg, *args)

    def _finished_files(self, read):
        """(mtime_ns, path, size) of each finished file not in ``read``;
        warns of files in ``read`` that changed size since."""
        found = []
        now = time.time()
        for path in list_files(self.paths):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue  # removed between the listing and now
            size = st.st_size
            if path in read:
                if size != read[path]:
                    self._warn_once(("changed", path, size),
                                    "a0 stream: %s was read at %d bytes and now has %d: it is not read again",
                                    path, read[path], size)
                continue
            if is_finished(path, size):
                found.append((st.st_mtime_ns, path, size))
                continue
            _check_mcap_head(path, size)
            if self.unfinished_after is not None and size > 0 and now - st.st_mtime >= self.unfinished_after:
                found.append((st.st_mtime_ns, path, size))
            elif self.unfinished_after is None:
                self._warn_once(("unfinished", path),
                                "a0 stream: %s has no MCAP footer yet (being written, or left by a writer that "
                                "died): read once its writer closes it (option readUnfinishedAfter reads such "
                                "files once they are that many seconds old)", path)
        found.sort()
        return found

    def initialOffset(self):
        return encode_files({})

    def getDefaultReadLimit(self):
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        self.target = {path for _, path, _ in self._finished_files({})}

    def latestOffset(self, start, limit):
        read = self._read_set(start)
        new = self._finished_files(read)
        if self.target is not None:
            new = [f for f in new if f[1] in self.target]
        if isinstance(limit, ReadMaxFiles):
            new = new[:max(1, int(limit.max_files))]
        if not new:
            return start
        files = dict(read)
        files.update((path, size) for _, path, size in new)
        return encode_files(files)

    def reportLatestOffset(self):
        return None

    def partitions(self, start, end):
        before = decode_files(start)
        after = decode_files(end)
        paths = []
        for path in sorted(set(after) - set(before)):
            if os.path.exists(path):
                paths.append(path)
            else:
                _log.warning("a0 stream: %s is in this batch but no longer exists: skipped", path)
        if not paths:
            return [FilesPartition(0, Part())]
        if self.options.message_type is not None:
            self._check_message_type(paths)
        parts = plan(paths, self.predicate, self.options)
        if not parts:
            return [FilesPartition(0, Part())]
        return [FilesPartition(i, p) for i, p in enumerate(parts)]

    def _check_message_type(self, paths):
        """Raises :class:`RecordingOptionError` naming the files whose
        selected channels decode to another type than the query's."""
        want = self.options.message_type
        for path in paths:
            found = message_types([path], self.predicate)
            other = {key: t for key, t in found.items() if t != want}
            if other:
                listed = "; ".join(f"{name or '(no schema)'} in {enc}" for name, enc in sorted(other))
                raise RecordingOptionError(
                    f"{path}: decode=true: its channels of {listed} decode to another type than the stream's "
                    f"message column ({want}); a stream decodes one message type: choose its topics with option "
                    "topics, or move the file out of the stream's path")

    def read(self, partition):
        yield from read_part(partition.part, self.predicate, self.options)

    def commit(self, end):
        pass
