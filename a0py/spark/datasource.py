"""The ``a0`` PySpark data source (Python Data Source API, PySpark 4.x).

    spark.read.format("a0").load("recordings/")            # MCAP files (any writer's), dirs, globs
    spark.read.format("a0").load("shm://robot/pose")        # a live topic's arena, now
    spark.readStream.format("a0").option("topics", "robot/pose").load()   # live topics
    spark.readStream.format("a0").load("recordings/")       # recordings, as they are finished

It is registered automatically where the ``pyspark_a0`` module is importable
(PySpark looks for ``pyspark_*`` modules exposing ``DefaultSource``), and by
:func:`a0py.spark.register`.

Options (all strings, case-insensitive names):

==================  =====================================================
``gaps``            ``true``: add gap rows and the columns ``is_gap``,
                    ``gap_first``, ``gap_last``.
``payload``         ``binary`` (default) or ``json``: parse payloads as
                    JSON objects into ``payloadSchema``.
``payloadSchema``   the struct of JSON payloads, as DDL (``x double, y
                    double``); or give ``.schema(...)`` with ``payload`` a
                    struct.
``maxPartitionBytes``  uncompressed chunk bytes per partition (32 MiB).
``validateCrc``     ``false`` skips the chunk CRC check (on by default).
``topics``          only these topics (names separated by ``,``): their
                    chunks alone are read, with or without pushdown (a
                    stream without a path: the live topics to stream).
``recordTime``      ``true`` adds ``time_record``: when the recorder read
                    each frame (its MCAP log time; null for arenas).
``decode``          ``true`` adds ``message`` (each message decoded with
                    its channel's schema: a struct, or the JSON text of
                    a schemaless JSON channel) and ``decode_error``
                    (null when it decoded); one message type per read.
``mcapColumns``     ``auto`` (default), ``true``, ``false``: the columns
                    ``log_time``, ``publish_time``, ``sequence``,
                    ``schema_name``, ``message_encoding`` after
                    ``payload``; ``auto`` adds them when the read selects
                    a channel a0py did not write or a typed topic (from
                    the files' summaries, when the schema is asked for).
``root``            where ``shm://TOPIC`` and streamed topics live
                    (``A0PY_ROOT`` syntax; default: the workers' ``A0PY_ROOT``).
==================  =====================================================

Where ``spark.sql.python.filterPushdown.enabled`` is true, filters on
``topic`` (=, IN), ``seq`` (=, <, <=, >, >=, IN) and ``time_wall`` (<, <=,
>, >=, =) are pushed down: whole chunks are skipped when the index proves no
row in them passes, and the rest is filtered in the reader, so the rows are
the same as without pushdown. (Spark keeps the read plan of the last
pushed-down query with the DataFrame and reuses it for a later query on the
same DataFrame that has no filter at all; load again for such a query. The
``topics`` option skips chunks without that caveat.) The streaming options
are described in :mod:`a0py.spark.topic_stream` (live topics: no path, or
``shm://`` names) and :mod:`a0py.spark.file_stream` (recordings: a path).
"""

from __future__ import annotations

import datetime as _dt
import glob
import json
import os

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from ..recording.errors import RecordingOptionError
from ..recording.reader import SHM_PREFIX, expand_paths
from .options import bool_option, lower_keys, mcap_columns_option, read_options
from .part_reader import read_part
from .planning import Part, message_type, plan, selects_mcap_channels
from .predicate import Predicate

FRAME_DDL = ("topic string, seq bigint, time_mono bigint, time_wall timestamp, "
             "headers map<string,string>, payload {payload}")
GAP_DDL = ", is_gap boolean, gap_first bigint, gap_last bigint"
RECORD_DDL = ", time_record timestamp"
MCAP_DDL = (", log_time timestamp, publish_time timestamp, sequence bigint, schema_name string, "
            "message_encoding string")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_KNOWN_OPTIONS = {"path", "paths", "gaps", "payload", "payloadschema", "maxpartitionbytes", "validatecrc",
                  "topics", "startingoffsets", "failondataloss", "maxframespertrigger", "root", "recordtime",
                  "headers", "mcapcolumns", "decode", "maxfilespertrigger", "readunfinishedafter",
                  "pushaggregates"}  # the JVM reader's; here Spark aggregates the rows either way
# Options of one kind of stream only (the two are told apart by the path: see streamReader).
_LIVE_STREAM_OPTIONS = {"startingoffsets": "startingOffsets", "failondataloss": "failOnDataLoss",
                        "maxframespertrigger": "maxFramesPerTrigger", "root": "root"}
_FILE_STREAM_OPTIONS = {"maxfilespertrigger": "maxFilesPerTrigger", "readunfinishedafter": "readUnfinishedAfter"}


def _opt(options, name, default=None):
    """Options reach the source as a case-insensitive dict; be safe with a plain one."""
    if name in options:
        return options[name]
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return default


def _check_options(options):
    for k in options:
        if k.lower() not in _KNOWN_OPTIONS:
            raise RecordingOptionError(
                f"unknown option {k!r} of the a0 source; known: gaps, payload, payloadSchema, maxPartitionBytes, "
                "validateCrc, recordTime, headers, mcapColumns, decode, root, topics, startingOffsets, failOnDataLoss, "
                "maxFramesPerTrigger, maxFilesPerTrigger, readUnfinishedAfter, pushAggregates")


def _payload_ddl(options):
    mode = str(_opt(options, "payload", "binary")).lower()
    if mode == "binary":
        return "binary"
    if mode != "json":
        raise RecordingOptionError(f"option payload={mode!r}: use binary or json")
    ddl = _opt(options, "payloadSchema")
    if not ddl:
        raise RecordingOptionError("option payload=json needs payloadSchema (DDL of the JSON object, e.g. "
                                   "'x double, y double') or a user schema whose payload is a struct")
    return f"struct<{ddl}>"


def _topics_option(low):
    return [t.strip() for t in str(low.get("topics") or "").split(",") if t.strip()]


def _paths(options):
    paths = _opt(options, "paths")
    if paths:
        try:
            got = json.loads(paths)
        except ValueError:
            got = [p for p in str(paths).split(",") if p]
        if isinstance(got, str):
            got = [got]
        return got
    path = _opt(options, "path")
    if not path:
        raise RecordingOptionError("the a0 source needs a path: spark.read.format('a0').load(PATH) "
                                   "(a recording, a directory, a glob, a file arena or shm://TOPIC)")
    return [path]


def _has_path(options):
    return bool(_opt(options, "path") or _opt(options, "paths"))


def _present(paths):
    """``paths`` less the globs that match nothing yet: what ``schema()``
    looks at (a stream of a glob may start before its first file; a batch
    read of such a glob fails when it is planned, naming the glob)."""
    return [p for p in paths if not (glob.has_magic(p) and not os.path.exists(p) and not glob.glob(p, recursive=True))]


def _is_file_stream(options):
    """Does ``spark.readStream`` with ``options`` read recordings (a path
    that is not all ``shm://`` names) rather than live topics?"""
    return _has_path(options) and not all(p.startswith(SHM_PREFIX) for p in _paths(options))


def _check_stream_options(options):
    """Raises :class:`RecordingOptionError` for an option of the other kind
    of stream than ``options`` make (recordings: a path; live topics: no
    path, or ``shm://`` names)."""
    low = lower_keys(options)
    if _is_file_stream(options):
        wrong = [name for key, name in _LIVE_STREAM_OPTIONS.items() if key in low]
        if wrong:
            raise RecordingOptionError(
                f"option {', '.join(wrong)} is for streams of live topics (option topics, no path); this stream "
                f"reads the recordings of {', '.join(_paths(options))}, file by file as they are finished "
                "(its options: maxFilesPerTrigger, readUnfinishedAfter)")
    else:
        wrong = [name for key, name in _FILE_STREAM_OPTIONS.items() if key in low]
        if wrong:
            raise RecordingOptionError(
                f"option {', '.join(wrong)} is for streams of recordings (load(PATH) with a directory, glob or "
                "files); this stream reads live topics (option topics)")


def _micros(value):
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        return (value - _EPOCH) // _dt.timedelta(microseconds=1)
    if isinstance(value, _dt.date):
        return _micros(_dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC))
    return None


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def push_filter(predicate, f):
    """``predicate`` narrowed by Spark filter ``f``, or None when ``f`` is not
    one the reader applies."""
    attr = getattr(f, "attribute", None)
    if attr is None or len(attr) != 1:
        return None
    col = attr[0]
    value = getattr(f, "value", None)
    if col == "topic":
        if isinstance(f, (EqualTo, EqualNullSafe)) and isinstance(value, str):
            return predicate.and_topics([value])
        if isinstance(f, In) and all(isinstance(v, str) for v in value):
            return predicate.and_topics(value)
        return None
    if col == "seq":
        if isinstance(f, In) and all(_is_int(v) for v in value):
            return predicate.and_seq(values=value)
        bounds = _int_bounds(f, value) if _is_int(value) else None
        return None if bounds is None else predicate.and_seq(*bounds)
    if col == "time_wall":
        us = _micros(value)
        bounds = None if us is None else _int_bounds(f, us)
        return None if bounds is None else predicate.and_wall(*bounds)
    return None


def _int_bounds(f, value):
    """The (lo, hi) range, both ends included (None: open), of the integers that
    comparison ``f`` with integer ``value`` keeps; None if ``f`` is no comparison."""
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return value, value
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value - 1
    if isinstance(f, LessThanOrEqual):
        return None, value
    return None


class A0Partition(InputPartition):
    """One :class:`a0py.spark.planning.Part` (a range of chunks, or an arena)."""

    def __init__(self, index, part):
        super().__init__(index)
        self.part = part


class A0DataSource(DataSource):
    """The ``a0`` format: a0py recordings (MCAP) and arenas as Spark rows."""

    @classmethod
    def name(cls):
        return "a0"

    def schema(self):
        _check_options(self.options)
        low = lower_keys(self.options)
        if bool_option(low, "decode", False):
            return self._decoded_schema(low)
        ddl = FRAME_DDL.format(payload=_payload_ddl(self.options))
        if not bool_option(low, "headers", True):
            ddl = ddl.replace("headers map<string,string>, ", "")
        if self._mcap_columns(low):
            ddl += MCAP_DDL
        if bool_option(low, "gaps", False):
            ddl += GAP_DDL
        if bool_option(low, "recordtime", False):
            ddl += RECORD_DDL
        return ddl

    def _decoded_schema(self, low):
        """The schema of a ``decode=true`` read: the columns of the read with
        ``message`` (its one message type's) and ``decode_error`` after the
        MCAP columns."""
        from pyspark.sql.pandas.types import from_arrow_schema

        from .batches import frame_schema

        if _payload_ddl(self.options) != "binary":
            raise RecordingOptionError("decode=true gives the decoded message in its own column: leave "
                                       "payload=json out")
        if not _has_path(self.options) or all(p.startswith(SHM_PREFIX) for p in _paths(self.options)):
            raise RecordingOptionError("decode=true reads recordings (a path), not live topics")
        predicate = Predicate()
        topics = _topics_option(low)
        if topics:
            predicate = predicate.and_topics(topics)
        paths = _present(_paths(self.options))
        if not paths or not expand_paths(paths):
            raise RecordingOptionError(
                f"decode=true: {', '.join(_paths(self.options))} holds no recording yet to take the message type "
                "from: give the schema with .schema(...) (its message column of the type to decode to), or start "
                "the stream once a file is there")
        mtype = message_type(paths, predicate)
        arrow = frame_schema(bool_option(low, "gaps", False), None, bool_option(low, "recordtime", False),
                             bool_option(low, "headers", True), self._mcap_columns(low), mtype)
        return from_arrow_schema(arrow, prefer_timestamp_ntz=False)

    def _mcap_columns(self, low):
        """Has the read the MCAP columns? ``mcapColumns`` true or false, or
        (auto) whether the files' channels that the ``topics`` option
        selects include one a0py did not write or a typed topic."""
        forced = mcap_columns_option(low)
        if forced is not None:
            return forced
        if not _has_path(self.options):
            return False  # a stream of live topics: a0py packets
        predicate = Predicate()
        topics = _topics_option(low)
        if topics:
            predicate = predicate.and_topics(topics)
        paths = _present(_paths(self.options))
        return bool(paths) and selects_mcap_channels(paths, predicate)

    def reader(self, schema):
        _check_options(self.options)
        if _called_for_pushdown():
            return A0PushdownReader(dict(self.options), schema)
        return A0BatchReader(dict(self.options), schema)

    def streamReader(self, schema):
        """The stream of live topics (option ``topics``, no path or
        ``shm://`` names: :mod:`.topic_stream`) or of a path's recordings
        (:mod:`.file_stream`); an option of the other one is an error."""
        _check_options(self.options)
        _check_stream_options(self.options)
        if _is_file_stream(self.options):
            from .file_stream import A0FileStreamReader

            return A0FileStreamReader(_paths(self.options), dict(self.options), schema)
        from .topic_stream import A0TopicStreamReader

        return A0TopicStreamReader(dict(self.options), schema)


class A0PythonDataSource(A0DataSource):
    """The Python ``a0`` source under a name of its own, ``a0.python``: the
    Python reader even in a session whose classpath has the JVM reader's jar
    (which takes the name ``a0``)."""

    @classmethod
    def name(cls):
        return "a0.python"


def _called_for_pushdown():
    """Is ``reader()`` being called by PySpark's filter-pushdown planner?

    PySpark refuses a reader that implements ``pushFilters`` when
    ``spark.sql.python.filterPushdown.enabled`` is false (the default), and
    the source cannot read that setting. But only the pushdown planner
    (``pyspark/sql/worker/data_source_pushdown_filters.py``) ever calls
    ``pushFilters``, and only when the setting is true: so the reader that
    can push filters is handed to that caller alone, and every other caller
    gets the plain reader, whose rows Spark filters itself."""
    import sys

    try:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
                return True
            frame = frame.f_back
    except (AttributeError, ValueError):
        pass
    return False


class A0BatchReader(DataSourceReader):
    def __init__(self, options, schema):
        self.paths = _paths(options)
        self.options = read_options(options, schema)
        self.predicate = Predicate()
        topics = _topics_option(lower_keys(options))
        if topics:
            self.predicate = self.predicate.and_topics(topics)

    def partitions(self):
        parts = plan(self.paths, self.predicate, self.options)
        if not parts:
            return [A0Partition(0, Part())]
        return [A0Partition(i, p) for i, p in enumerate(parts)]

    def read(self, partition):
        yield from read_part(partition.part, self.predicate, self.options)


class A0PushdownReader(A0BatchReader):
    """The batch reader with filter pushdown (see :func:`_called_for_pushdown`)."""

    def pushFilters(self, filters):
        for f in filters:
            narrowed = push_filter(self.predicate, f)
            if narrowed is None:
                yield f
            else:
                self.predicate = narrowed
