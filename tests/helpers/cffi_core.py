"""The C core (csrc/*.c) compiled as a throw-away cffi extension (API mode),
declared from its public headers as they are: used by the layout and
fault-injection tests (core/test_transport_cffi.py) and by the model test's
step-by-step reader (core/test_transport_model.py)."""

import glob
import importlib.util
import os
import re

import cffi

from helpers.procs import REPO

CSRC = os.path.join(REPO, "csrc")

# The public headers whose declarations the tests use, read as they are.
HEADERS = ("a0_err.h", "a0_arena.h", "a0_transport.h", "a0_deadman.h")

# What the headers take from system headers, for cffi's parser: `...` lets
# the C compiler fill in sizes and layouts (checked when the module builds).
CDEF_PRELUDE = """
typedef struct { ...; } pthread_mutex_t;
typedef int... time_t;
struct timespec { time_t tv_sec; long tv_nsec; ...; };
void* aligned_alloc(size_t alignment, size_t size);
void free(void* p);
"""


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _inline_bodies_to_prototypes(text):
    """`static inline T f(args) { body }` -> `T f(args);` (cffi calls the
    header's own inline definition through the generated C)."""
    out, i = [], 0
    for m in re.finditer(r"static\s+inline\s+([^{;]*?\))\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        out.append(m.group(1) + ";")
        depth, j = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def cdef_from_headers(names=HEADERS):
    """The declarations of csrc/<names>, made digestible for cffi.cdef: no
    comments, no includes or guards, every valued #define as `...` (cffi
    asks the compiler for the value), inline bodies as prototypes."""
    parts = [CDEF_PRELUDE]
    for name in names:
        with open(os.path.join(CSRC, name)) as f:
            text = _strip_comments(f.read()).replace("\\\n", " ")
        lines = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                m = re.match(r"#\s*define\s+([A-Za-z_]\w*)\s+\S", stripped)
                if m:  # object-like macro with a value (function-like ones have "(")
                    lines.append(f"#define {m.group(1)} ...")
                continue
            if stripped.startswith("_Static_assert"):
                continue
            lines.append(line)
        parts.append(_inline_bodies_to_prototypes("\n".join(lines)))
    return "\n".join(parts)


def build_core(out_dir):
    """(ffi, lib) of csrc/*.c compiled as a cffi extension (API mode) in
    out_dir, declared from the headers."""
    ffibuilder = cffi.FFI()
    ffibuilder.cdef(cdef_from_headers())
    ffibuilder.set_source(
        "_a0_core_cffi",
        "#include <stdlib.h>\n" + "".join(f'#include "{h}"\n' for h in HEADERS),
        sources=sorted(glob.glob(os.path.join(CSRC, "*.c"))),
        include_dirs=[CSRC],
        extra_compile_args=["-std=gnu11", "-D_GNU_SOURCE", "-O1"],
        libraries=["pthread"],
    )
    path = ffibuilder.compile(tmpdir=str(out_dir), verbose=False)
    spec = importlib.util.spec_from_file_location("_a0_core_cffi", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ffi, mod.lib
