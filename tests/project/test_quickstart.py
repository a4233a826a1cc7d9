"""docs/quickstart.md, run as a newcomer would: every snippet on the page runs,
and what the page shows a command print, it prints.

The page's conventions (the page is the test's input; keep them when editing it):

* The page is read section by section (``## `` headings). Sections run in page
  order, in one scratch directory and one private ``A0PY_ROOT`` (and broker
  name, ``A0PY_BROKER``) for the whole page: a later section may use what an
  earlier one made (the recording ``rec``). A section's test first runs the
  sections before it that have not run yet, so each test also runs alone.
* ```` ```sh ```` blocks are not run (installing; ``tests/project/test_install.py``
  covers that).
* ```` ```console ```` blocks: each ``$ COMMAND`` line runs (split as a shell
  would split words; ``a0py`` and ``python`` are this environment's), to
  completion within a bound, and must exit 0; the lines after it, up to the
  next ``$``, are what it prints (stdout and stderr together), checked
  loosely: each must match a line of the output, in order, ``...`` standing
  for any text and a run of spaces for any whitespace.
* ``<!-- run: background -->`` right before a console block: its one command
  is started in the background (terminal 1) and left running while the rest
  of the section runs; at the end of the section its printed lines are
  checked as above (waiting for them, bounded), an ``http://`` address it
  printed is fetched, and it is stopped with Ctrl-C (SIGINT), latest first,
  and must exit 0 without a traceback. The next command starts once it is
  ready: it has printed something or mapped an arena.
* ```` ```python ```` blocks whose first line is ``# NAME.py`` are files: they
  are saved under that name and run by the console lines that name them.
  Other python blocks of a section are joined, in order, into one program
  run in a subprocess at the end of the section; the ```` ```text ```` blocks
  of the section are what it prints (checked loosely).
* ``<!-- run: in-process spark -->`` right before a python block: it runs in
  this process, with ``spark`` bound to the suite's one SparkSession (the
  ``spark`` fixture; the block's ``getOrCreate()`` returns it), its printed
  output checked against the section's text blocks.
* The port 8765 in a command, and in what it prints, becomes a free port.
"""

import contextlib
import io
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from a0py.proto import topic as tp

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "quickstart.md"
RUN_S = 60          # one foreground command
READY_S = 30        # a background command getting ready, or printing what the page shows
LIMIT_S = 420       # a whole test (it may run the sections before its own, and start Spark)


# --- reading the page ----------------------------------------------------------------------------

FENCE = re.compile(r"^(?:<!-- run: (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                   re.M | re.S)


def sections():
    """[(title, [(marker, lang, body), ...])] in page order."""
    text = DOC.read_text(encoding="utf-8")
    out = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, rest = part.partition("\n")
        out.append((title.strip(), [(m["marker"], m["lang"], m["body"]) for m in FENCE.finditer(rest)]))
    return out


def commands(body):
    """[(command, [expected lines])] of a console block."""
    out = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:].split("  #")[0].strip(), []))
        elif line.strip():
            assert out, f"console output before any command: {line!r}"
            out[-1][1].append(line)
    return out


def pattern(line):
    pieces = [r"\s+".join(re.escape(w) for w in re.split(r"\s+", p.strip())) if p.strip() else ""
              for p in line.split("...")]
    return re.compile(".*".join(pieces))


def unmatched(expected, output):
    """The first expected line that no line of ``output`` matches in order (None: all do)."""
    lines = output.splitlines()
    i = 0
    for want in expected:
        pat = pattern(want)
        while i < len(lines) and not pat.search(lines[i]):
            i += 1
        if i == len(lines):
            return want
        i += 1
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- running it ----------------------------------------------------------------------------------

class Background:
    def __init__(self, argv, cwd, env, log):
        self.argv = argv
        self.log = log
        self.out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=self.out,
                                     stderr=subprocess.STDOUT)
        self.guard = threading.Timer(LIMIT_S, self.proc.kill)
        self.guard.start()

    def text(self):
        return Path(self.log).read_text(errors="backslashreplace")

    def ready(self, token):
        if self.text():
            return True
        try:
            maps = Path(f"/proc/{self.proc.pid}/maps").read_text()
        except OSError:
            return False
        return token in maps

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout=RUN_S)
        finally:
            self.guard.cancel()
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.out.close()
        return rc

    def kill(self):
        self.guard.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()


class Walkthrough:
    """The page's scratch directory, environment and progress."""

    def __init__(self, workdir):
        self.token = f"qs{uuid.uuid4().hex[:10]}"
        self.root = f"shm:{self.token}"
        self.dir = workdir
        self.env = dict(os.environ)
        self.env.pop("COLUMNS", None)
        self.env.update(A0PY_ROOT=self.root, A0PY_BROKER=self.token, PYTHONUNBUFFERED="1",
                        PATH=os.pathsep.join((str(Path(sys.executable).parent), self.env.get("PATH", ""))),
                        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), self.env.get("PYTHONPATH")) if p))
        self.sections = sections()
        self.done = 0
        self.background = []

    def upto(self, title, request):
        titles = [t for t, _ in self.sections]
        k = titles.index(title)
        while self.done <= k:
            t, blocks = self.sections[self.done]
            self.done += 1  # a failed section is not run again for the next test
            self.run_section(t, blocks, request)

    @staticmethod
    def ported(command, expected):
        """The command and its expected lines with the port 8765 made a free one."""
        port = str(free_port())
        return shlex.split(command.replace("8765", port)), [e.replace("8765", port) for e in expected]

    def run_section(self, title, blocks, request):
        program, in_process, texts = [], [], []
        started = []
        try:
            for marker, lang, body in blocks:
                if lang == "python" and re.match(r"# ([\w.-]+\.py)\n", body):
                    name = body.split("\n", 1)[0][2:].strip()
                    (self.dir / name).write_text(body)
                elif lang == "python" and marker == "in-process spark":
                    in_process.append(body)
                elif lang == "python":
                    assert marker is None, (title, marker)
                    program.append(body)
                elif lang == "text":
                    texts.extend(line for line in body.splitlines() if line.strip())
                elif lang == "console" and marker == "background":
                    [(command, expected)] = commands(body)
                    argv, expected = self.ported(command, expected)
                    bg = Background(argv, self.dir, self.env,
                                    self.dir / f"bg{len(self.background)}.log")
                    self.background.append(bg)
                    started.append((bg, command, expected))
                    deadline = time.monotonic() + READY_S
                    while not bg.ready(self.token):
                        assert bg.proc.poll() is None, (command, bg.proc.returncode, bg.text())
                        assert time.monotonic() < deadline, f"{command!r} not ready: {bg.text()!r}"
                        time.sleep(0.05)
                elif lang == "console":
                    assert marker is None, (title, marker)
                    for command, expected in commands(body):
                        argv, expected = self.ported(command, expected)
                        done = subprocess.run(argv, cwd=self.dir, env=self.env,
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, timeout=RUN_S)
                        out = done.stdout.decode(errors="backslashreplace")
                        assert done.returncode == 0, (title, command, done.returncode, out)
                        assert "Traceback" not in out, (title, command, out)
                        miss = unmatched(expected, out)
                        assert miss is None, (title, command, f"does not print {miss!r}", out)
                else:
                    assert lang == "sh", f"section {title!r}: a {lang or 'plain'} block the test cannot run"
            if program:
                done = subprocess.run([sys.executable, "-c", "\n".join(program)], cwd=self.dir, env=self.env,
                                      stdin=subprocess.DEVNULL, capture_output=True, timeout=RUN_S)
                out = done.stdout.decode()
                assert done.returncode == 0, (title, done.stderr.decode())
                miss = unmatched(texts, out)
                assert miss is None, (title, f"does not print {miss!r}", out)
            if in_process:
                spark = request.getfixturevalue("spark")
                out = io.StringIO()
                here = os.getcwd()
                os.chdir(self.dir)
                try:
                    with contextlib.redirect_stdout(out):
                        exec(compile("\n".join(in_process), f"{DOC}:{title}", "exec"),  # noqa: S102
                             {"spark": spark, "__name__": "__quickstart__"})
                finally:
                    os.chdir(here)
                miss = unmatched(texts, out.getvalue())
                assert miss is None, (title, f"does not print {miss!r}", out.getvalue())
            for bg, command, expected in started:
                deadline = time.monotonic() + READY_S
                while unmatched(expected, bg.text()) is not None and time.monotonic() < deadline:
                    assert bg.proc.poll() is None, (command, bg.proc.returncode, bg.text())
                    time.sleep(0.05)
                miss = unmatched(expected, bg.text())
                assert miss is None, (title, command, f"does not print {miss!r}", bg.text())
                url = re.search(r"http://[\w.:]+/", bg.text())
                if url:
                    with urllib.request.urlopen(url.group(0), timeout=RUN_S) as page:
                        assert page.status == 200 and b"<html" in page.read(4096).lower()
            for bg, command, _ in reversed(started):
                rc = bg.stop()
                assert rc == 0, (title, command, rc, bg.text())
                assert "Traceback" not in bg.text(), (title, command, bg.text())
        finally:
            for bg, _, _ in started:
                bg.kill()

    def close(self):
        for bg in self.background:
            bg.kill()
        tp.close_arenas()
        for name in tp.list_topics(self.root):
            tp.unlink_topic(tp.Topic(name, root=self.root))
        for path in Path("/dev/shm").glob(f"*{self.token}*"):  # the broker's arenas, wherever they live
            path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    w = Walkthrough(tmp_path_factory.mktemp("quickstart"))
    yield w
    w.close()


@pytest.fixture(autouse=True)
def bounded():
    def expired(signum, frame):
        raise TimeoutError(f"quickstart test still running after {LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# --- the tests -----------------------------------------------------------------------------------

def test_the_page_has_the_steps_a_newcomer_needs():
    titles = [t for t, _ in sections()]
    text = DOC.read_text(encoding="utf-8")
    for needle in ("Install", "pub/sub from the shell", "pub/sub from Python", "Images", "Record", "view",
                   "broker", "Spark"):
        assert any(needle in t for t in titles), needle
    for needle in ("a0py echo", "a0py pub", "a0py.Publisher", "a0py.SubscriberSync", "a0py.Subscriber(",
                   "like=frame", 'size="32M"', "a0py record", "a0py bag info", "a0py play", "a0py view",
                   'spark.read.format("a0")', "a0py.spark.register(spark)", "a0py broker", "a0py claim",
                   "a0py facts"):
        assert needle in text, needle


def test_a_callback_subscriber_script_keeps_running():
    """The page's sub.py: a Subscriber alone would let the script exit at once."""
    [body] = [b for _, blocks in sections() for _, lang, b in blocks if lang == "python" and
              b.startswith("# sub.py")]
    assert "a0py.Subscriber(" in body and "signal.pause()" in body


def test_the_loose_match_rejects_what_the_page_does_not_show():
    assert unmatched(["robot/pose: ... frames, 0 gaps"], "robot/pose: 40 frames, 0 gaps") is None
    assert unmatched(["robot/pose: ... frames, 0 gaps"], "robot/pose: 40 frames, 2 gaps") is not None
    assert unmatched(["b", "a"], "a\nb") == "a"  # in order


@pytest.mark.parametrize("title", [t for t, _ in sections()])
def test_section_runs_as_the_page_says(title, walk, request):
    walk.upto(title, request)
