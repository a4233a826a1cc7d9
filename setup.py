"""Build a0py: the C core (csrc/, warnings are errors) and the Cython modules.

Every ``a0py/**/*.pyx`` becomes an extension module. Modules that use the C
core get the core's objects they need linked in (``a0py._core`` all of them;
``a0py.recording._bulk`` the packet codec, which it cimports through
``a0py/includes/a0_packet.pxd`` instead of re-implementing it); those
objects are compiled first, on their own, with ``-Wall -Wextra -Werror`` so
a warning in the core fails the build, while Cython's generated C keeps
milder flags.

``A0PY_ONLY=a0py.dataspace._compiled,a0py._core`` builds only the named
modules (handy while one of them is being edited); ``A0PY_DEBUG=1`` builds
without optimisation.
"""

import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
CORE_SOURCES = sorted(glob.glob("csrc/*.c"))
# Module -> the core sources linked into it.
CORE_USERS = {"a0py._core": CORE_SOURCES, "a0py.recording._bulk": ["csrc/a0_packet.c"]}
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
    """Compile the C core with warnings as errors, then the Cython modules."""

    def build_extension(self, ext):
        if ext.name in CORE_USERS:
            objects = self.compiler.compile(
                CORE_USERS[ext.name],
                output_dir=self.build_temp,
                include_dirs=["csrc"],
                extra_postargs=CORE_CFLAGS,
                depends=glob.glob("csrc/*.[ch]"),
            )
            ext.extra_objects = list(objects)
        super().build_extension(ext)


def module_name(path):
    return os.path.splitext(path)[0].replace(os.sep, ".")


def extensions():
    only = {m.strip() for m in os.environ.get("A0PY_ONLY", "").split(",") if m.strip()}
    exts = []
    for pyx in sorted(glob.glob("a0py/**/*.pyx", recursive=True)):
        name = module_name(pyx)
        if only and name not in only:
            continue
        exts.append(Extension(
            name, [pyx],
            include_dirs=["csrc"],
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
    ),
    cmdclass={"build_ext": BuildExtStrictCore},
)
