"""Topics: a name, one arena per protocol, under a root; the arenas this process has open.

Topic ``T`` is stored as one arena per protocol — ``T.pubsub``, ``T.rpc``, ``T.prpc``,
``T.log``, ``T.cfg``, ``T.deadman``, and ``T.schema`` for a typed topic's schema
(:mod:`a0py.proto.schema`) — under a *root* taken from ``A0PY_ROOT``:

* unset or empty: POSIX shared memory, objects named ``/a0py.<T>.<protocol>`` (a ``/`` in
  the topic becomes ``:``), i.e. files in ``/dev/shm``;
* ``shm:PREFIX``: shared memory with another prefix (``/PREFIX.<T>.<protocol>``), so
  separate groups of processes (test runs, robots in simulation) never meet;
* anything else: a directory; topic ``a/b`` is the file arena ``DIR/a/b.<protocol>.a0``.
  Directories a0py makes there are 0700; a symbolic link or another user's directory
  between the root and an arena is refused (:class:`a0py.ArenaPermissionError`).

Invariants:

* **Either side creates.** Every opener creates the arena if it is missing (exclusive
  create, so exactly one initializes it) or attaches to it at the size it already has, so
  a subscriber started before its publisher, or after it, or across its restart, meets
  the same arena. The size a creator uses is, in order: the topic's own (``Topic(name,
  size=)``), ``A0PY_TOPIC_SIZES`` (``"camera=64M,lidar/points=32M"``), the protocol's
  from ``A0PY_ARENA_SIZE_<PROTOCOL>``, ``A0PY_ARENA_SIZE``, then :data:`DEFAULT_SIZES`.
* **One mapping per arena per process.** Arenas are cached by (root, topic, protocol)
  in the process's one arena cache (:mod:`a0py.proto.arena_cache`: one lock, one
  Transport per thread, emptied in a forked child) and shared by every publisher,
  subscriber and thread of the process. They stay mapped until :func:`close_arenas`
  (or process exit).
* **Names are checked** before anything is created: segments of letters, digits, ``_``,
  ``-`` and ``.`` separated by ``/``; a leading ``/`` (ROS style) is dropped.
"""

import os
import re
import stat

from .. import _core
from ..errors import A0Error, A0OSError, ArenaExistsError, ArenaPermissionError, ArgumentError
from . import arena_cache
from .sizes import read_size

__all__ = [
    "CFG", "DEADMAN", "DEFAULT_SIZES", "LOG", "PRPC", "PROTOCOLS", "PUBSUB", "RPC", "SCHEMA",
    "Root", "Topic", "close_arenas", "current_root", "forget_arena", "list_topics",
    "make_private_dirs", "map_arena", "remove_empty_dirs", "thread_transport", "topic_arena",
    "unlink_topic",
]

PUBSUB = "pubsub"
RPC = "rpc"
PRPC = "prpc"
LOG = "log"
CFG = "cfg"
DEADMAN = "deadman"
SCHEMA = "schema"
PROTOCOLS = (PUBSUB, RPC, PRPC, LOG, CFG, DEADMAN, SCHEMA)

_MIB = 1 << 20
#: Arena size a creator uses when nothing else says (bytes).
DEFAULT_SIZES = {
    PUBSUB: 4 * _MIB,
    RPC: 4 * _MIB,
    PRPC: 4 * _MIB,
    LOG: 1 * _MIB,
    CFG: 1 * _MIB,
    DEADMAN: 4096,  # the deadman lives in the header: no frames needed
    SCHEMA: 64 * 1024,  # one record; a publisher whose schema is larger creates it larger
}
_OTHER_PROTOCOL_SIZE = 1 * _MIB

DEFAULT_SHM_PREFIX = "a0py"
MAX_TOPIC_LENGTH = 200
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_TOPIC_RE = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
_PROTOCOL_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_PREFIX_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}")


def check_topic_name(name):
    """The canonical form of topic `name` (a leading ``/`` dropped). Raises
    :class:`ArgumentError` saying what is wrong with it."""
    if not isinstance(name, str):
        raise ArgumentError(f"a topic name must be a str, not {type(name).__name__} ({name!r})")
    canon = name[1:] if name.startswith("/") else name
    if not canon:
        raise ArgumentError("a topic name may not be empty")
    if len(canon) > MAX_TOPIC_LENGTH:
        raise ArgumentError(f"topic name too long ({len(canon)} > {MAX_TOPIC_LENGTH} characters): {name!r}")
    if not _TOPIC_RE.fullmatch(canon):
        raise ArgumentError(
            f"bad topic name {name!r}: use segments of letters, digits, '_', '-' and '.' "
            "(not starting with '.' or '-') separated by single '/', e.g. 'robot/camera.left'")
    return canon


def check_protocol(protocol):
    if not isinstance(protocol, str) or not _PROTOCOL_RE.fullmatch(protocol):
        raise ArgumentError(f"bad protocol name {protocol!r}: lower-case letters, digits and '_', "
                            f"e.g. one of {', '.join(PROTOCOLS)}")
    return protocol


def parse_size(value, what="arena size"):
    """The bytes of an arena size: an int or a string like ``"64M"``, ``"512k"``,
    ``"1GiB"`` (the grammar of :mod:`a0py.proto.sizes`), at least the core's
    ``MIN_ARENA_SIZE``. Raises :class:`ArgumentError` naming `what`."""
    size = read_size(value, what)
    minimum = _core.MIN_ARENA_SIZE
    if size < minimum:
        raise ArgumentError(f"{what} must be at least {minimum} bytes, got {size}")
    return size


class Root:
    """Where topics live: shared memory with a name prefix, or a directory.

    ``Root.parse(spec)`` reads the ``A0PY_ROOT`` syntax (``None``/``""``: shared memory
    ``a0py``; ``"shm:PREFIX"``; anything else: a directory path, made absolute now).
    Raises :class:`ArgumentError` for a bad or empty prefix (``"shm:"``)."""

    __slots__ = ("kind", "location")

    def __init__(self, kind, location):
        self.kind = kind          # "shm" or "dir"
        self.location = location  # the shm prefix, or the absolute directory

    @classmethod
    def parse(cls, spec):
        if isinstance(spec, Root):
            return spec
        if spec is None or spec == "":
            return cls("shm", DEFAULT_SHM_PREFIX)
        if isinstance(spec, os.PathLike):
            spec = os.fspath(spec)
        if not isinstance(spec, str):
            raise ArgumentError(f"a topic root must be a str or path, not {type(spec).__name__}")
        if spec.startswith("shm:"):
            prefix = spec[4:]
            if not prefix:
                raise ArgumentError(f"shared-memory root {spec!r} names no prefix: give one, e.g. "
                                    f"'shm:robot1', or leave the root unset for the default "
                                    f"'shm:{DEFAULT_SHM_PREFIX}'")
            if not _PREFIX_RE.fullmatch(prefix):
                raise ArgumentError(f"bad shared-memory root {spec!r}: the prefix after 'shm:' may hold "
                                    "letters, digits, '_', '-' and '.' (at most 64), e.g. 'shm:robot1'")
            return cls("shm", prefix)
        if "\0" in spec:
            raise ArgumentError(f"a topic root may not contain a NUL byte: {spec!r}")
        return cls("dir", os.path.abspath(os.path.expanduser(spec)))

    def location_of(self, topic, protocol):
        """The shm name or file path of `topic`'s `protocol` arena."""
        if self.kind == "shm":
            return f"/{self.location}.{topic.replace('/', ':')}.{protocol}"
        return os.path.join(self.location, *topic.split("/")) + f".{protocol}.a0"

    def spec(self):
        """This root in ``A0PY_ROOT`` syntax."""
        return f"shm:{self.location}" if self.kind == "shm" else self.location

    def _key(self):
        return (self.kind, self.location)

    def __eq__(self, other):
        return isinstance(other, Root) and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"Root({self.spec()!r})"


def current_root():
    """The root ``A0PY_ROOT`` names now."""
    return Root.parse(os.environ.get("A0PY_ROOT"))


def _env_topic_sizes():
    spec = os.environ.get("A0PY_TOPIC_SIZES", "").strip()
    sizes = {}
    if not spec:
        return sizes
    for part in spec.split(","):
        if not part.strip():
            continue
        name, sep, size = part.partition("=")
        if not sep:
            raise ArgumentError(f"A0PY_TOPIC_SIZES: expected TOPIC=SIZE items separated by ',', got {part!r}")
        sizes[check_topic_name(name.strip())] = parse_size(size, f"A0PY_TOPIC_SIZES size of {name.strip()!r}")
    return sizes


class Topic:
    """A topic: a checked name, its root, and optionally the size its arenas get when
    this process creates them.

    ``Topic(name, root=None, size=None)``: `root` in ``A0PY_ROOT`` syntax or a
    :class:`Root` (default: ``A0PY_ROOT`` now); `size` in bytes (or ``"64M"``) for every
    protocol but the deadman, or a dict ``{protocol: size}``. Anything that takes a topic
    takes a name or a Topic. Raises :class:`ArgumentError` for a bad name, root or size."""

    __slots__ = ("_size", "name", "root")

    def __init__(self, name, root=None, size=None):
        self.name = check_topic_name(name)
        self.root = current_root() if root is None else Root.parse(root)
        if size is None or isinstance(size, dict):
            self._size = {check_protocol(p): parse_size(s, f"size of {p} arenas of topic {self.name!r}")
                          for p, s in (size or {}).items()}
        else:
            self._size = parse_size(size, f"arena size of topic {self.name!r}")

    @classmethod
    def of(cls, topic):
        """`topic` itself if it is a Topic, else ``Topic(topic)``."""
        return topic if isinstance(topic, Topic) else cls(topic)

    def size_for(self, protocol):
        """The size this process creates `protocol`'s arena with (see the module doc)."""
        check_protocol(protocol)
        if isinstance(self._size, dict):
            if protocol in self._size:
                return self._size[protocol]
        elif protocol != DEADMAN:
            return self._size
        if protocol != DEADMAN:
            per_topic = _env_topic_sizes().get(self.name)
            if per_topic is not None:
                return per_topic
            for var in (f"A0PY_ARENA_SIZE_{protocol.upper()}", "A0PY_ARENA_SIZE"):
                value = os.environ.get(var, "").strip()
                if value:
                    return parse_size(value, var)
        return DEFAULT_SIZES.get(protocol, _OTHER_PROTOCOL_SIZE)

    def location(self, protocol):
        """The shared-memory name or file path of this topic's `protocol` arena."""
        return self.root.location_of(self.name, check_protocol(protocol))

    def arena(self, protocol, *, create=True):
        """This topic's `protocol` arena, mapped once per process (see
        :func:`topic_arena`)."""
        return topic_arena(self, protocol, create=create)

    def exists(self, protocol):
        """Whether this topic's `protocol` arena exists (in any process)."""
        where = self.location(protocol)
        if self.root.kind == "shm":
            return os.path.exists("/dev/shm" + where)
        return os.path.exists(where)

    def protocols(self):
        """The protocols whose arenas this topic has now under its root: those of
        :data:`PROTOCOLS` in that order, then any other (a broker's, a user's own)
        sorted, as :func:`list_topics` finds them."""
        found = []
        if self.root.kind == "shm":
            stem = f"{self.root.location}.{self.name.replace('/', ':')}."
            try:
                names = os.listdir("/dev/shm")
            except OSError:
                names = []
            found = [n[len(stem):] for n in names if n.startswith(stem)]
        else:
            where = os.path.join(self.root.location, *self.name.split("/"))
            stem = os.path.basename(where) + "."
            try:
                names = os.listdir(os.path.dirname(where))
            except OSError:
                names = []
            found = [n[len(stem):-3] for n in names if n.startswith(stem) and n.endswith(".a0")]
        known = {p: i for i, p in enumerate(PROTOCOLS)}
        return sorted((p for p in found if _PROTOCOL_RE.fullmatch(p)),
                      key=lambda p: (known.get(p, len(known)), p))

    def unlink(self, protocols=None):
        """Removes this topic's arenas (all protocols, or those given); returns the
        protocols that existed. Processes that have them mapped keep using them; new
        openers create fresh ones."""
        return unlink_topic(self, protocols)

    def __eq__(self, other):
        return isinstance(other, Topic) and (other.name, other.root) == (self.name, self.root)

    def __hash__(self):
        return hash((self.name, self.root))

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Topic({self.name!r}, root={self.root.spec()!r})"


def _open(topic, protocol, create):
    """Creates the arena at the topic's size, or attaches to it as it is: whoever came
    first chose the size (a later side asking another size still joins it)."""
    where = topic.location(protocol)
    size = topic.size_for(protocol) if create else None
    if topic.root.kind == "shm":
        try:
            return _core.Arena.shm(where, size)
        except ArenaExistsError:
            return _core.Arena.shm(where)
    _topic_dirs(topic, create)
    try:
        return _core.Arena.file(where, size)
    except ArenaExistsError:
        return _core.Arena.file(where)


def map_arena(topic, protocol, *, create=True):
    """A new mapping of `topic`'s `protocol` arena, not cached (the caller closes it):
    with ``create=True`` created at :meth:`Topic.size_for` if missing (exclusive create,
    so one creator initializes it) or attached as it is; else it must exist. For arenas
    that one object owns and removes (a broker's client arenas), or that a caller only
    looks at. Raises as :func:`topic_arena`."""
    topic = Topic.of(topic)
    return _open(topic, check_protocol(protocol), create)


def remove_empty_dirs(topic):
    """Removes the directories between a directory root and `topic`'s arenas that are
    empty now, deepest first (best effort: a directory another process just filled, or
    may not remove, stays). Nothing for a shared-memory root or a topic of one segment.
    For whoever unlinks an arena that was alone in its directory."""
    topic = Topic.of(topic)
    if topic.root.kind != "dir":
        return
    parts = topic.name.split("/")[:-1]
    while parts:
        try:
            os.rmdir(os.path.join(topic.root.location, *parts))
        except OSError:
            return
        parts.pop()


def _key(topic, protocol):
    return ("topic", topic.root, topic.name, protocol)


def topic_arena(topic, protocol, *, create=True):
    """The arena of `topic`'s `protocol` (a name or :class:`Topic`), mapped once per
    process and cached (:mod:`a0py.proto.arena_cache`). ``create=True`` creates it if
    missing (either side may), else it must exist.

    Raises :class:`ArgumentError` (bad name or protocol), :class:`a0py.ArenaNotFoundError`
    (``create=False`` and missing), and the errors of :meth:`a0py.Arena.shm` /
    :meth:`a0py.Arena.file` (another version's arena, no space in ``/dev/shm``...)."""
    topic = Topic.of(topic)
    check_protocol(protocol)
    return arena_cache.arena(_key(topic, protocol), _open, topic, protocol, create)


def forget_arena(topic, protocol):
    """Drops `topic`'s `protocol` arena from this process's cache (without closing it:
    objects using it keep it); returns it, or None. The next opener maps it afresh."""
    return arena_cache.forget(_key(Topic.of(topic), protocol))


def thread_transport(topic, protocol, *, create=True):
    """A :class:`a0py.Transport` on `topic`'s `protocol` arena for the calling thread
    (a Transport holds a cursor and lock state, so each thread gets its own; cached)."""
    topic = Topic.of(topic)
    return arena_cache.transport(_key(topic, protocol), _open, topic, protocol, create)


def close_arenas():
    """Unmaps every arena this process opened through topics. Only once nothing of
    this process uses them any more (subscribers closed): a node on its way out, or a
    test. Errors closing one (a lock still held) leave it to process exit."""
    arena_cache.close("topic")


def unlink_topic(topic, protocols=None):
    """Removes `topic`'s arenas (every protocol, or those in `protocols`) from its
    root; returns the protocols that existed. Mappings stay valid in the processes that
    have them; the next opener creates a fresh arena."""
    topic = Topic.of(topic)
    removed = []
    for protocol in PROTOCOLS if protocols is None else protocols:
        forget_arena(topic, protocol)
        where = topic.location(protocol)
        if topic.root.kind == "shm":
            existed = _core.Arena.unlink_shm(where)
        else:
            try:
                os.unlink(where)
                existed = True
            except FileNotFoundError:
                existed = False
        if existed:
            removed.append(protocol)
    return removed


def list_topics(root=None):
    """The topics under `root` (default ``A0PY_ROOT``) as ``{topic: [protocols]}``,
    sorted. Names that are not topic arenas are ignored."""
    root = current_root() if root is None else Root.parse(root)
    found = {}
    if root.kind == "shm":
        prefix = root.location + "."
        try:
            names = os.listdir("/dev/shm")
        except OSError:
            names = []
        for name in names:
            if not name.startswith(prefix):
                continue
            topic, _, protocol = name[len(prefix):].rpartition(".")
            topic = topic.replace(":", "/")
            if topic and _TOPIC_RE.fullmatch(topic) and _PROTOCOL_RE.fullmatch(protocol):
                found.setdefault(topic, []).append(protocol)
    else:
        for dirpath, _dirs, files in os.walk(root.location):
            rel = os.path.relpath(dirpath, root.location)
            for name in files:
                if not name.endswith(".a0"):
                    continue
                stem, _, protocol = name[:-3].rpartition(".")
                topic = stem if rel == "." else f"{rel.replace(os.sep, '/')}/{stem}"
                if stem and _TOPIC_RE.fullmatch(topic) and _PROTOCOL_RE.fullmatch(protocol):
                    found.setdefault(topic, []).append(protocol)
    return {t: sorted(ps) for t, ps in sorted(found.items())}


def make_private_dirs(path):
    """``os.makedirs(path, exist_ok=True)``, but every directory it creates gets mode
    0700 (less if the umask takes bits away, never more): what a0py writes into a
    directory it made (arenas, recordings) is for its own user unless asked otherwise.
    Directories that exist are left as they are. Raises ``OSError``."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        make_private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def _topic_dirs(topic, create):
    """The directories between a directory root and `topic`'s arenas: made (0700)
    when `create`; each must be a directory of this process's user, not a symbolic
    link, since a link planted there would aim the arena at any file. (The root is
    the user's own choice and may be a link.)"""
    where = topic.root.location
    try:
        if create:
            make_private_dirs(where)
        for part in topic.name.split("/")[:-1]:
            where = os.path.join(where, part)
            if create:
                try:
                    os.mkdir(where, 0o700)
                except FileExistsError:
                    pass
            try:
                st = os.lstat(where)
            except FileNotFoundError:
                return  # not created: opening the arena says the topic does not exist
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
                        if not stat.S_ISDIR(st.st_mode) else f"owned by uid {st.st_uid}")
                raise ArenaPermissionError(
                    f"topic {topic.name!r}: {where} is {what}, not a directory of uid "
                    f"{os.geteuid()}: refused, it could place the topic's arenas anywhere. If "
                    "you do not know who made it, remove it (as its owner or root) and try again",
                    path=where, uid=st.st_uid, mode=stat.S_IMODE(st.st_mode))
    except OSError as e:
        if isinstance(e, A0Error):
            raise
        raise A0OSError(e.errno, f"topic {topic.name!r}: cannot create the directory "
                        f"{where!r}: {e.strerror}") from None
