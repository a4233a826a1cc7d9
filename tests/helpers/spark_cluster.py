"""A Spark standalone cluster on this machine (a master and its workers, each a
``spark-class`` process of the installed pyspark), for the cluster test and for
``bench/spark.py read``. Needs no pytest: the bench imports it too."""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[2])  # the checkout under test

# Five JVMs on two cores: the quick JIT tier only (the test; a benchmark leaves it out).
QUICK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on just now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standalone_cluster(work, workers=2, cores=1, memory="1g", daemon_memory="256m", daemon_opts=QUICK_JVM):
    """Starts a master and ``workers`` workers (``cores`` cores, ``memory`` for
    executors each) listening on 127.0.0.1, their logs and work directories under
    ``work``; yields ``(master_url, env)``, ``env`` being the environment a driver
    process should run with (this checkout on PYTHONPATH, SPARK_HOME, the daemon
    JVM options in SPARK_DAEMON_JAVA_OPTS). Stops them all on exit, killing any
    that does not stop within 30 s."""
    import pyspark

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_LOG_DIR=str(work), SPARK_WORKER_DIR=str(work / "work"),
               SPARK_DAEMON_MEMORY=daemon_memory, SPARK_DAEMON_JAVA_OPTS=daemon_opts,
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = []
    logs = []
    try:
        log = open(work / "master.log", "w")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(free_port())],
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
        for i in range(workers):
            log = open(work / f"worker{i}.log", "w")  # noqa: SIM115 - closed below
            logs.append(log)
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                                           "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                           "--webui-port", str(free_port()), "--work-dir", str(work / f"w{i}")],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        yield master_url, env
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
        shutil.rmtree(work / "work", ignore_errors=True)
