"""Discovery: be told of the topics that exist and of each new one, by glob.

``Discovery(glob, callback)`` calls ``callback(name)`` once for every topic under the
root whose name matches `glob` — those present now, then each one created later by any
process — on a thread of its own, until :meth:`Discovery.close`.

Globs match topic names segment-wise: ``*`` is any run of characters within one
segment, ``?`` one character, ``[abc]`` / ``[!abc]`` one of (or none of) a set, ``**`` any
number of whole segments (``robot/**`` matches ``robot/arm`` and ``robot/arm/joint1``;
``**/camera`` also matches ``camera``).

How it learns of new topics: Linux inotify on the root (``/dev/shm`` for a
shared-memory root; the directory and each subdirectory for a directory root), so a new
topic is announced as soon as its first arena is created, without polling. Where
inotify cannot be used (no inotify, or the limit of watches reached) it lists the root
every `poll_interval` seconds instead. Either way a topic is announced once, however
many protocols' arenas it has (and it stays announced if it is removed).
"""

import ctypes
import errno
import logging
import os
import re
import select
import struct
import threading

from ..errors import A0Error, ArgumentError
from .lifetime import Closeable
from .topic import (
    Root,
    check_protocol,
    check_topic_name,
    current_root,
    list_topics,
    make_private_dirs,
)

__all__ = ["Discovery", "compile_glob"]

_log = logging.getLogger("a0py.discovery")

_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE_SELF = 0x00000400
_IN_Q_OVERFLOW = 0x00004000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_SHM_DIR = "/dev/shm"


def compile_glob(pattern):
    """A compiled regular expression for topic-name glob `pattern` (see the module
    doc). Raises ArgumentError for a pattern that is not a str or is empty."""
    if not isinstance(pattern, str):
        raise ArgumentError(f"a discovery glob must be a str like 'robot/*', not {type(pattern).__name__}")
    pat = pattern[1:] if pattern.startswith("/") else pattern
    if not pat:
        raise ArgumentError("a discovery glob may not be empty (use '**' for every topic)")
    out, i, n = [], 0, len(pat)
    while i < n:
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pat.find("]", i + 2 if pat.startswith("[!", i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pat[i + 1:j]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    try:
        return re.compile("".join(out) + r"\Z")
    except re.error as e:
        raise ArgumentError(f"bad discovery glob {pattern!r}: {e}") from None


def _parse_shm_name(root, name):
    prefix = root.location + "."
    if not name.startswith(prefix):
        return None
    topic, _, protocol = name[len(prefix):].rpartition(".")
    return _checked(topic.replace(":", "/"), protocol)


def _parse_dir_path(root, path):
    if not path.endswith(".a0"):
        return None
    rel = os.path.relpath(path, root.location)
    if rel.startswith(".."):
        return None
    stem, _, protocol = rel[:-3].rpartition(".")
    return _checked(stem.replace(os.sep, "/"), protocol)


def _checked(topic, protocol):
    try:
        return check_topic_name(topic), check_protocol(protocol)
    except ArgumentError:
        return None


class _Inotify:
    """The inotify calls, through libc (the standard library has no binding)."""

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._add.restype = ctypes.c_int
        init = libc.inotify_init1
        init.argtypes = (ctypes.c_int,)
        init.restype = ctypes.c_int
        fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"inotify_init1: {os.strerror(e)}")
        self.fd = fd
        self.dirs = {}  # wd -> directory path

    def watch(self, path, mask):
        wd = self._add(self.fd, os.fsencode(path), mask)
        if wd < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"inotify_add_watch {path!r}: {os.strerror(e)}")
        self.dirs[wd] = path
        return wd

    def events(self):
        """The events queued now: (directory, mask, name)."""
        out = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            except InterruptedError:
                continue
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
                raw = data[pos + _EVENT.size:pos + _EVENT.size + length]
                pos += _EVENT.size + length
                out.append((self.dirs.get(wd), mask, os.fsdecode(raw.rstrip(b"\0"))))

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Discovery(Closeable):
    """Calls ``callback(name)`` once for each topic under `root` (default
    ``A0PY_ROOT``) whose name matches `glob`: those present now and each created
    later, on a thread of its own, until :meth:`close`. With `protocols` (e.g.
    ``("pubsub",)``) only topics that have an arena of one of those protocols count.

    ``mode`` says how it learns of new topics (``"inotify"`` or ``"poll"``, every
    `poll_interval` seconds); ``topics`` is what it has announced. A raising callback is
    logged (logger ``a0py.discovery``) and discovery goes on. Raises ArgumentError for a
    bad glob, callback, root, protocol or interval."""

    def __init__(self, glob, callback, *, root=None, protocols=None, poll_interval=0.5,
                 use_inotify=True):
        if not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)) \
                or not poll_interval > 0:
            raise ArgumentError(f"poll_interval must be a number of seconds > 0, not {poll_interval!r}")
        if isinstance(protocols, str):
            protocols = (protocols,)
        self.protocols = None if protocols is None else frozenset(check_protocol(p) for p in protocols)
        self.glob = glob
        self._match = compile_glob(glob).match
        self.root = current_root() if root is None else Root.parse(root)
        self._callback = callback
        self._interval = float(poll_interval)
        self._lock = threading.Lock()
        self._announced = set()
        self._closed = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._inotify = None
        self.mode = "poll"
        if use_inotify:
            try:
                self._inotify = self._start_inotify()
                self.mode = "inotify"
            except OSError as e:
                _log.info("discovery on %s: inotify unavailable (%s); polling every %s s",
                          self.root, e, self._interval)
        self._thread = threading.Thread(target=self._run, name="a0py-discovery", daemon=True)
        self._thread.start()

    # --- watching

    def _start_inotify(self):
        ino = _Inotify()
        try:
            if self.root.kind == "shm":
                ino.watch(_SHM_DIR, _IN_CREATE | _IN_MOVED_TO)
            else:
                make_private_dirs(self.root.location)
                self._watch_tree(ino, self.root.location)
        except OSError:
            ino.close()
            raise
        return ino

    def _watch_tree(self, ino, top):
        """Watches `top` and every directory below it (watch first, then list, so a
        directory made meanwhile is seen one way or the other)."""
        ino.watch(top, _IN_CREATE | _IN_MOVED_TO | _IN_DELETE_SELF)
        try:
            entries = list(os.scandir(top))
        except OSError:
            return
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                self._watch_tree(ino, entry.path)

    def _run(self):
        try:
            self._scan()
            if self._inotify is not None:
                self._run_inotify()
            else:
                self._run_poll()
        except Exception:
            _log.exception("discovery on %s stopped", self.root)
        finally:
            if self._inotify is not None:
                self._inotify.close()

    def _run_poll(self):
        while not self._closed:
            select.select([self._wake_r], [], [], self._interval)
            if self._closed:
                return
            self._scan()

    def _run_inotify(self):
        ino = self._inotify
        poller = select.poll()
        poller.register(ino.fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._closed:
            try:
                poller.poll()
            except InterruptedError:
                continue
            if self._closed:
                return
            rescan = False
            for where, mask, name in ino.events():
                if mask & _IN_Q_OVERFLOW:
                    rescan = True
                    continue
                if where is None or not name:
                    continue
                path = os.path.join(where, name)
                if self.root.kind == "shm":
                    self._offer(_parse_shm_name(self.root, name))
                elif mask & _IN_ISDIR:
                    try:
                        self._watch_tree(ino, path)
                    except OSError as e:
                        if e.errno in (errno.ENOSPC, errno.EMFILE):
                            _log.warning("discovery on %s: %s; polling from now on", self.root, e)
                            self._inotify = None
                            ino.close()
                            self._run_poll()
                            return
                    rescan = True  # files made in it before the watch
                else:
                    self._offer(_parse_dir_path(self.root, path))
            if rescan:
                self._scan()

    def _scan(self):
        try:
            found = list_topics(self.root)
        except A0Error as e:
            _log.warning("discovery on %s: cannot list topics: %s", self.root, e)
            return
        for topic, protocols in found.items():
            for protocol in protocols:
                self._offer((topic, protocol))

    def _offer(self, parsed):
        if parsed is None or self._closed:
            return
        topic, protocol = parsed
        if self.protocols is not None and protocol not in self.protocols:
            return
        if not self._match(topic):
            return
        with self._lock:
            if topic in self._announced:
                return
            self._announced.add(topic)
        try:
            self._callback(topic)
        except Exception:
            _log.exception("discovery callback raised for topic %r", topic)

    # --- lifetime

    @property
    def topics(self):
        """The topic names announced so far."""
        with self._lock:
            return set(self._announced)

    @property
    def closed(self):
        return self._closed

    def close(self, timeout=5.0):
        """Stops discovery; returns once the thread has ended (unless called from the
        callback). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._forked_copy():  # a forked child's copy has no thread to stop
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
            if threading.current_thread() is not self._thread:
                self._thread.join(timeout)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self):
        return f"<a0py.Discovery {self.glob!r} on {self.root} ({self.mode}, {len(self.topics)} topics)>"
