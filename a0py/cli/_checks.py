"""The checks of ``a0py doctor``: what breaks a0py on a new machine, each
found out without changing anything, each with what to do about it.

A check is a function returning one :class:`Finding` (or several); none
raises: a check that cannot tell says so as a ``warn``. The order of
:data:`CHECKS` is the order a person would look: shared memory first, then
the root, the arenas in it, then the optional parts.

What the peers' users ask about most, and where it is checked here:
shared memory left behind after a crash (:func:`check_stale_arenas`),
containers that do not share ``/dev/shm`` (:func:`check_shm_shared`), and
discovery that fails silently (:func:`check_zenoh`, :func:`check_ros2`).
"""

import importlib.util
import os
import shutil
import socket
import stat
import struct
import subprocess
from dataclasses import asdict, dataclass

from a0py.cli import _procs

OK, WARN, FAIL = "ok", "warn", "fail"
_SHM_DIR = "/dev/shm"
_MIB = 1 << 20
# Below this much free room in /dev/shm a default topic (4 MiB per protocol,
# several protocols) soon cannot be created.
_SHM_LOW = 64 * _MIB
# Docker's default /dev/shm for a container without --ipc=host / --shm-size.
_DOCKER_DEFAULT_SHM = 64 * _MIB


@dataclass
class Finding:
    """One line of the doctor's report: ``status`` is ok, warn or fail;
    ``detail`` what was found; ``todo`` what to do (empty when nothing)."""

    check: str
    status: str
    detail: str
    todo: str = ""

    def as_dict(self):
        return asdict(self)


def _size_text(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", _MIB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def check_shm_room():
    """/dev/shm exists, is a directory every user may create in, and has room."""
    try:
        st = os.stat(_SHM_DIR)
    except OSError as e:
        return Finding("shm", FAIL, f"{_SHM_DIR} is missing ({e.strerror})",
                       "mount a tmpfs there (mount -t tmpfs tmpfs /dev/shm), or set "
                       "A0PY_ROOT=/some/dir to use file arenas")
    if not stat.S_ISDIR(st.st_mode):
        return Finding("shm", FAIL, f"{_SHM_DIR} is not a directory", "mount a tmpfs at /dev/shm")
    if not os.access(_SHM_DIR, os.W_OK | os.X_OK):
        return Finding("shm", FAIL, f"{_SHM_DIR} is not writable by this user (mode "
                       f"{stat.S_IMODE(st.st_mode):o})", "chmod 1777 /dev/shm (as root)")
    fs = os.statvfs(_SHM_DIR)
    free, total = fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize
    detail = f"{_SHM_DIR}: {_size_text(free)} free of {_size_text(total)}"
    if free < _SHM_LOW:
        return Finding("shm", WARN, detail + " (little room: a few default topics fill it)",
                       "remove unused arenas (a0py rm), or give the machine or container more "
                       "(docker run --shm-size=1g)")
    return Finding("shm", OK, detail)


def _namespace(pid, kind):
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _in_container():
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    try:
        with open("/proc/1/cgroup") as f:
            text = f.read()
    except OSError:
        return False
    return any(word in text for word in ("docker", "kubepods", "containerd", "libpod"))


def _shm_users_elsewhere():
    """``[pid]`` of the processes (those whose /proc entries this user may read)
    that have shared memory from /dev/shm mapped but see another /dev/shm than
    this process does: another mount namespace with its own tmpfs there."""
    mine = _namespace("self", "mnt")
    try:
        my_dev = os.stat(_SHM_DIR).st_dev
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        theirs = _namespace(pid, "mnt")
        if theirs is None or theirs == mine:
            continue
        try:
            if os.stat(f"/proc/{pid}/root{_SHM_DIR}").st_dev == my_dev:
                continue
            with open(f"/proc/{pid}/maps", "rb") as f:
                maps = f.read()
        except OSError:
            continue
        if b" /dev/shm/" in maps:
            found.append(pid)
    return found


def check_shm_shared():
    """Whether this process sees the same /dev/shm objects as the others.

    Two processes see the same arenas only if they share the /dev/shm mount.
    The usual way to lose that is a container started without ``--ipc=host``
    (Docker gives each one a private 64 MiB tmpfs): publisher and subscriber
    each make their own arena and never meet, with no error on either side.
    Found three ways: processes using shared memory that see another /dev/shm;
    PID 1 seeing another one (when this user may look); a container whose
    /dev/shm has Docker's private default size."""
    todo = ("run every process that talks over a0py in one IPC and mount namespace (docker: "
            "--ipc=host, or --ipc=container:NAME for all of them)")
    elsewhere = _shm_users_elsewhere()
    if elsewhere:
        shown = "; ".join(_procs.describe(pid, 40) for pid in elsewhere[:4])
        return Finding("shm-shared", WARN, f"{len(elsewhere)} processes use shared memory from "
                       f"another /dev/shm than this one, so they see other arenas: {shown}", todo)
    mine, init = _namespace("self", "mnt"), _namespace(1, "mnt")
    if mine and init and mine != init:
        try:
            same = os.stat(_SHM_DIR).st_dev == os.stat(f"/proc/1/root{_SHM_DIR}").st_dev
        except OSError:
            same = True
        if not same:
            return Finding("shm-shared", WARN, "this process has its own /dev/shm mount, apart from "
                           "PID 1's: processes outside its mount namespace see other arenas", todo)
    if _in_container():
        fs = os.statvfs(_SHM_DIR)
        if fs.f_blocks * fs.f_frsize == _DOCKER_DEFAULT_SHM:
            return Finding("shm-shared", WARN, "in a container whose /dev/shm is 64 MiB, Docker's "
                           "private default: processes in other containers (and on the host) see "
                           "other arenas", todo)
        return Finding("shm-shared", OK, "in a container; its /dev/shm is not Docker's private "
                       "default (check that the peers run with the same --ipc)")
    return Finding("shm-shared", OK, "one /dev/shm for every process of this namespace")


def check_root():
    """``A0PY_ROOT`` names a usable root: its kind, and for a directory,
    that it exists or can be made, is writable, with its mode and owner."""
    from a0py.errors import A0Error
    from a0py.proto.topic import Root

    spec = os.environ.get("A0PY_ROOT")
    try:
        root = Root.parse(spec)
    except A0Error as e:
        return Finding("root", FAIL, f"A0PY_ROOT={spec!r}: {e}", "fix or unset A0PY_ROOT")
    if root.kind == "shm":
        return Finding("root", OK, f"shared memory, objects {_SHM_DIR}/{root.location}.* "
                       f"(A0PY_ROOT={spec or 'unset'})")
    path = root.location
    if not os.path.exists(path):
        parent = os.path.dirname(path.rstrip("/")) or "/"
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if os.access(parent, os.W_OK | os.X_OK):
            return Finding("root", OK, f"directory {path} (not made yet; a0py makes it 0700)")
        return Finding("root", FAIL, f"directory {path} is missing and {parent} is not writable",
                       f"mkdir -p {path} (as a user who may), or choose another A0PY_ROOT")
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return Finding("root", FAIL, f"A0PY_ROOT {path} is not a directory",
                       "point A0PY_ROOT at a directory, or use shm:PREFIX")
    try:
        import pwd
        owner = pwd.getpwuid(st.st_uid).pw_name
    except (KeyError, ImportError):
        owner = str(st.st_uid)
    mode = stat.S_IMODE(st.st_mode)
    detail = f"directory {path}, mode {mode:o}, owner {owner}"
    if not os.access(path, os.W_OK | os.X_OK):
        return Finding("root", FAIL, detail + ": not writable by this user",
                       f"chmod u+w {path}, or use a root of your own")
    if st.st_uid != os.getuid():
        return Finding("root", WARN, detail + ": another user's directory, which a0py refuses to "
                       "create arenas under", "use a root this user owns")
    if mode & 0o022:
        return Finding("root", WARN, detail + ": others may write in it", f"chmod go-w {path}")
    return Finding("root", OK, detail)


def _root_arenas():
    """``[(topic, protocol, location, size)]`` of every arena under the root."""
    from a0py.proto.topic import current_root, list_topics

    root = current_root()
    found = []
    for topic, protocols in list_topics(root).items():
        for protocol in protocols:
            location = root.location_of(topic, protocol)
            path = _procs.arena_path(root, location)
            try:
                size = os.stat(path).st_size
            except OSError:
                continue
            found.append((topic, protocol, path, size))
    return found


def check_stale_arenas(arenas=None):
    """Topics whose arenas no running process has open: left by processes that
    ended (a crash leaves them; so does a clean exit, since topics outlive
    their processes by design, as a cfg must)."""
    arenas = _root_arenas() if arenas is None else arenas
    if not arenas:
        return Finding("arenas", OK, "no arenas under this root")
    open_now = _procs.attached([path for *_, path, _size in arenas])
    stale = {}
    for topic, _protocol, path, size in arenas:
        if path not in open_now:
            stale[topic] = stale.get(topic, 0) + size
    total = sum(size for *_, size in arenas)
    if not stale:
        return Finding("arenas", OK, f"{len(arenas)} arenas ({_size_text(total)}), each open in a "
                       "running process")
    names = sorted(stale)
    shown = ", ".join(f"{t} ({_size_text(stale[t])})" for t in names[:8])
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    return Finding("arenas", WARN, f"{len(names)} topics that no running process has open, "
                   f"{_size_text(sum(stale.values()))} in all: {shown}{more}",
                   f"a0py rm {' '.join(names[:8])}{' ...' if more else ''} (keep a cfg you mean to "
                   "keep)")


def _arena_format(path):
    """(magic, version) of the arena header at ``path``, or None if unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return None
    if len(head) < 12:
        return None
    return struct.unpack("<QI", head)


def check_arena_formats(arenas=None):
    """Arenas written by another version of a0py's format, which this one
    refuses to open (ArenaFormatError)."""
    from a0py import _core

    arenas = _root_arenas() if arenas is None else arenas
    other = []
    for topic, protocol, path, _size in arenas:
        found = _arena_format(path)
        if found is None:
            continue
        magic, version = found
        if magic != _core.MAGIC:
            other.append(f"{topic}.{protocol} (not an a0py arena)")
        elif version != _core.FORMAT_VERSION:
            other.append(f"{topic}.{protocol} (format {version})")
    if not other:
        return Finding("formats", OK, f"every arena is format {_core.FORMAT_VERSION}, this a0py's")
    topics = sorted({item.split(".")[0] for item in other})
    return Finding("formats", FAIL, f"{len(other)} arenas this a0py (format {_core.FORMAT_VERSION}) "
                   f"cannot open: {', '.join(other[:6])}{' ...' if len(other) > 6 else ''}",
                   f"stop the processes of the other a0py version, then a0py rm {' '.join(topics[:6])}")


# extra -> (modules it brings, what it enables)
EXTRAS = {
    "record": (("mcap", "zstandard", "lz4", "numpy", "pyarrow"), "a0py record, play, bag info"),
    "typed": (("numpy", "google.protobuf", "foxglove_schemas_protobuf"),
              "typed topics: arrays, images, protobuf and Foxglove messages"),
    "view": (("mcap", "zstandard", "lz4", "numpy"), "a0py view FILE.mcap"),
    "spark": (("pyspark", "pyarrow"), "the a0 Spark data source"),
    "bridge": (("zenoh",), "a0py bridge (topics across machines over Zenoh)"),
    "foxglove": (("foxglove",), "a0py view --foxglove-sdk"),
    "ros": (("rosbags", "mcap_ros2"), "rosbag2 recordings and ROS 2 CDR decoding"),
    "ros2": (("rclpy",), "a0py ros2 (a0py inside a running ROS 2 system)"),
}


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_extras():
    """Which extras are installed, and what each enables: one finding each."""
    findings = []
    for extra, (modules, enables) in EXTRAS.items():
        missing = [m for m in modules if not _installed(m)]
        if not missing:
            findings.append(Finding(f"extra:{extra}", OK, f"installed: {enables}"))
        else:
            findings.append(Finding(f"extra:{extra}", OK, f"not installed ({', '.join(missing)} "
                                    f"missing): {enables} needs it",
                                    f"pip install 'a0py[{extra}]'"))
    return findings


def _java_version():
    java = shutil.which("java")
    if java is None:
        return None, None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return java, None
    text = out.stderr or out.stdout
    for token in text.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and "." in token:
            return java, int(head if head != "1" else token.split(".")[1])
    return java, None


def check_java():
    """Java 17 or newer and the a0py jar, for the JVM reader of Spark."""
    if not _installed("pyspark"):
        return Finding("java", OK, "Spark not installed: no Java needed")
    java, major = _java_version()
    if java is None:
        return Finding("java", FAIL, "the spark extra is installed but there is no java on PATH",
                       "install a JDK 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    if major is None or major < 17:
        return Finding("java", FAIL, f"{java} is Java {major or '?'}; Spark 4 needs 17 or newer",
                       "install a JDK 17 and put it first on PATH (or set JAVA_HOME)")
    jar = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "spark", "jars", "a0py-spark.jar")
    if not os.path.exists(jar):
        return Finding("java", WARN, f"Java {major} at {java}, but the JVM reader's jar is not built "
                       f"({jar}): Spark falls back to the Python source", "make jvm (in a checkout)")
    return Finding("java", OK, f"Java {major} at {java}; JVM reader {jar}")


def check_chromium():
    """Debian's chromium, which only the page tests need."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Finding("chromium", OK, f"{found} (for the view's page tests)")
    return Finding("chromium", OK, "not found: only the view's page tests need it",
                   "apt-get install chromium (to run the page tests)")


def check_zenoh(endpoint):
    """A Zenoh endpoint (``tcp/HOST:PORT``) answers a TCP connect."""
    proto, _, address = endpoint.partition("/")
    host, _, port = address.rpartition(":")
    if proto not in ("tcp", "tls", "quic", "udp") or not host or not port.isdigit():
        return Finding("zenoh", FAIL, f"{endpoint!r} is not an endpoint such as tcp/10.0.0.2:7447",
                       "give --zenoh tcp/HOST:PORT")
    if proto not in ("tcp", "tls"):
        return Finding("zenoh", WARN, f"{endpoint}: only tcp and tls endpoints are probed")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=3):
            pass
    except OSError as e:
        return Finding("zenoh", FAIL, f"{endpoint}: cannot connect ({e.strerror or e})",
                       "start the bridge there (a0py bridge --listen ...), or check the address "
                       "and the firewall")
    return Finding("zenoh", OK, f"{endpoint} accepts connections")


def check_ros2():
    """ROS 2 discovery stays on this host, and a domain id is chosen."""
    scope = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    domain = os.environ.get("ROS_DOMAIN_ID", "")
    where = f"ROS_DOMAIN_ID={domain or 'unset (0)'}"
    if scope in (None, ""):
        return Finding("ros2", OK, f"ROS_AUTOMATIC_DISCOVERY_RANGE unset: a0py ros2 sets LOCALHOST, "
                       f"so discovery stays on this host; {where}")
    if scope.upper() == "LOCALHOST":
        return Finding("ros2", OK, f"discovery limited to this host; {where}")
    if scope.upper() == "OFF":
        return Finding("ros2", WARN, "ROS_AUTOMATIC_DISCOVERY_RANGE=OFF: no node will be found",
                       "unset it, or set LOCALHOST")
    return Finding("ros2", WARN, f"ROS_AUTOMATIC_DISCOVERY_RANGE={scope}: discovery reaches "
                   f"beyond this host; {where}", "set ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "
                   "unless other machines must see these nodes")


def run_checks(zenoh=None, ros2=False):
    """Every check, in report order; ``zenoh`` (an endpoint) and ``ros2`` add
    the network checks, which are off unless asked for."""
    findings = [check_shm_room(), check_shm_shared(), check_root()]
    try:
        arenas = _root_arenas()
    except Exception as e:  # a root we cannot list is a finding, not a traceback
        findings.append(Finding("arenas", FAIL, f"cannot list the root's arenas: {e}"))
    else:
        findings += [check_stale_arenas(arenas), check_arena_formats(arenas)]
    findings += check_extras()
    findings += [check_java(), check_chromium()]
    if zenoh:
        findings.append(check_zenoh(zenoh))
    if ros2:
        findings.append(check_ros2())
    return findings
