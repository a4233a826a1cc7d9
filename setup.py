"""Build a0py: the C core (csrc/, warnings are errors), the Cython modules, and
the jar of the ``a0`` Spark source's JVM reader.

Every ``a0py/**/*.pyx`` becomes an extension module. Modules that use the C
core get the core's objects they need linked in (``a0py._core`` all of them;
``a0py.recording._bulk`` and ``a0py.bridge._ingest`` the packet codec, which
they cimport through ``a0py/includes/a0_packet.pxd`` instead of
re-implementing it); those
objects are compiled first, on their own, with ``-Wall -Wextra -Werror`` so
a warning in the core fails the build, while Cython's generated C keeps
milder flags.

``A0PY_ONLY=a0py.dataspace._compiled,a0py._core`` builds only the named
modules (handy while one of them is being edited); ``A0PY_DEBUG=1`` builds
without optimisation.

The jar (``a0py/spark/jars/a0py-spark.jar``, package data) is what ``make
jvm`` builds; building from an sdist that lacks it (or has an older one)
compiles ``jvm/`` the same way, with ``javac`` against the jars of an
installed ``pyspark``, when both are there, and otherwise goes on without
it (the Python reader then serves every read).
"""

import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CORE_SOURCES = sorted(glob.glob("csrc/*.c"))
# Module -> the core sources linked into it.
CORE_USERS = {"a0py._core": CORE_SOURCES, "a0py.recording._bulk": ["csrc/a0_packet.c"],
              "a0py.bridge._ingest": ["csrc/a0_packet.c"]}
# Modules compiled against numpy's C API. Built where numpy is importable at build
# time (it is in the build requirements); elsewhere left out, and a0py uses its
# Python code for the same thing (a0py.proto.arrays says which it has).
NUMPY_USERS = {"a0py.proto._ndarray"}
CORE_DEPENDS = sorted(glob.glob("csrc/*.[ch]") + glob.glob("a0py/_core.pxd")
                      + glob.glob("a0py/includes/*.pxd") + glob.glob("a0py/binding/*.pxi"))
DEBUG = os.environ.get("A0PY_DEBUG") == "1"
# -g0 overrides the -g of Python's own CFLAGS: debug info is 80 % of each
# module's size (4.3 MB of _core's 5.1), and a wheel of it is no use to anyone
# who has not the build tree; A0PY_DEBUG=1 builds for a debugger.
OPT = ["-O0", "-g"] if DEBUG else ["-O2", "-g0"]
CORE_CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wshadow",
               "-Wstrict-prototypes", "-Wno-unused-parameter", "-fPIC",
               "-D_GNU_SOURCE", *OPT]
CYTHON_CFLAGS = ["-Wno-unused-function", "-Wno-unreachable-code", *OPT]


class BuildExtStrictCore(build_ext):
    """Compile the C core with warnings as errors, then the Cython modules:
    one module per CPU at once (``_core`` alone is most of the build; the
    others compile beside it), each module's core objects in a folder of its
    own so that two modules never write the same object file."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext):
        if ext.name in CORE_USERS:
            objects = self.compiler.compile(
                CORE_USERS[ext.name],
                output_dir=os.path.join(self.build_temp, ext.name),
                include_dirs=["csrc"],
                extra_postargs=CORE_CFLAGS,
                depends=glob.glob("csrc/*.[ch]"),
            )
            ext.extra_objects = list(objects)
        super().build_extension(ext)


JAR = os.path.join("a0py", "spark", "jars", "a0py-spark.jar")


def build_jar():
    """Compiles jvm/ into JAR where it is missing or older than its sources
    and javac and pyspark's jars are at hand; else leaves it as it is."""
    import importlib.util
    import shutil
    import subprocess
    import tempfile

    sources = sorted(glob.glob("jvm/src/**/*.java", recursive=True))
    if not sources:
        return
    newest = max(os.path.getmtime(p) for p in sources + glob.glob("jvm/resources/**/*", recursive=True))
    if os.path.exists(JAR) and os.path.getmtime(JAR) >= newest:
        return
    spec = importlib.util.find_spec("pyspark")
    if not (shutil.which("javac") and shutil.which("jar") and spec and spec.origin):
        print("a0py: no javac or pyspark here: the JVM reader's jar is not built (the Python reader serves)")
        return
    jars = os.path.join(os.path.dirname(spec.origin), "jars")
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(["javac", "--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp", os.path.join(jars, "*"),
                        "-d", classes, *sources], check=True)
        shutil.copytree("jvm/resources", classes, dirs_exist_ok=True)
        os.makedirs(os.path.dirname(JAR), exist_ok=True)
        subprocess.run(["jar", "--create", "--file", JAR, "-C", classes, "."], check=True)


class BuildPyWithJar(build_py):
    """Package data includes the JVM reader's jar: build it first."""

    def run(self):
        build_jar()
        super().run()


def module_name(path):
    return os.path.splitext(path)[0].replace(os.sep, ".")


def extensions():
    only = {m.strip() for m in os.environ.get("A0PY_ONLY", "").split(",") if m.strip()}
    exts = []
    for pyx in sorted(glob.glob("a0py/**/*.pyx", recursive=True)):
        name = module_name(pyx)
        if only and name not in only:
            continue
        include_dirs, macros = ["csrc"], []
        if name in NUMPY_USERS:
            try:
                import numpy
            except ImportError:
                print(f"a0py: numpy is not installed here: {name} is not built (Python code serves)")
                continue
            include_dirs.append(numpy.get_include())
            macros.append(("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"))
        exts.append(Extension(
            name, [pyx],
            include_dirs=include_dirs,
            define_macros=macros,
            extra_compile_args=CYTHON_CFLAGS,
            # Every core source and header, and the binding's included parts
            # and declarations: editing any of them must rebuild and relink.
            depends=CORE_DEPENDS if name in CORE_USERS else [],
        ))
    return exts


setup(
    ext_modules=cythonize(
        extensions(),
        compiler_directives={"language_level": "3", "embedsignature": True},
        quiet=True,
        nthreads=os.cpu_count() or 1,
    ),
    cmdclass={"build_ext": BuildExtStrictCore, "build_py": BuildPyWithJar},
)
