"""Files and functions stay small enough to hold one concept (issue 29, STYLE.md
"one file per type; a function per phase"):

- no Python, Cython (``.pyx``, ``.pxi``, ``.pxd``), Java or JavaScript file under
  ``a0py/`` or ``jvm/`` is over :data:`MAX_FILE_LINES` lines (the C core and the
  bench scripts are outside these folders);
- no function is over :data:`MAX_FUNCTION_LINES` lines, from its ``def`` line to
  its last line: Python functions as ``ast`` gives them; Cython ``def``, ``cdef``
  and ``cpdef`` functions by indentation (the body ends before the next code line
  indented at or left of the ``def``; blank lines, comments and lines inside a
  triple-quoted string end nothing); Java methods and constructors by counting
  braces, comments and literals left out.

Checked on the source; nothing is imported.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
FOLDERS = ("a0py", "jvm")
SUFFIXES = {".py", ".pyx", ".pxi", ".pxd", ".java", ".js", ".mjs"}
SKIPPED_DIRS = {"__pycache__", "node_modules", "build"}

# Files or functions allowed past the limits, with the reason beside each: none
# since issue 29's splits landed. An entry is a decision, never a convenience.
CURRENT_OFFENDERS: set[str] = set()


def sources():
    """The files the limits hold, relative to the root, in order."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            rel = path.relative_to(ROOT)
            if path.suffix in SUFFIXES and path.is_file() and not SKIPPED_DIRS & set(rel.parts):
                found.append(rel.as_posix())
    return found


# -- functions and their lengths: (name, first line, last line)


def python_functions(text, name="<source>"):
    tree = ast.parse(text, name)
    return [(node.name, node.lineno, node.end_lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


_CYTHON_DEF = re.compile(
    r"^(?P<indent>[ \t]*)(?:async[ \t]+def|def|cpdef|cdef)[ \t]+"
    r"(?!(?:class|extern|struct|enum|union|packed|ctypedef|fused|public[ \t]+(?:class|struct|enum))\b)"
    r"[^=(#]*?\b(?P<name>\w+)[ \t]*\(")


def _string_state(lines):
    """For each line, whether it starts inside a triple-quoted string."""
    inside, quote, states = False, None, []
    for line in lines:
        states.append(inside)
        for match in re.finditer(r'"""|\'\'\'', line):
            if not inside:
                inside, quote = True, match.group()
            elif match.group() == quote:
                inside = False
    return states


def cython_functions(text):
    lines = text.split("\n")
    in_string = _string_state(lines)
    functions = []
    for i, line in enumerate(lines):
        match = None if in_string[i] else _CYTHON_DEF.match(line)
        if match is None:
            continue
        # the signature may go on over several lines: it ends where its parentheses close,
        # and a definition's ends with ':' (a declaration's does not)
        depth, end_of_signature = 0, i
        for end_of_signature in range(i, len(lines)):
            code = lines[end_of_signature].split("#", 1)[0]
            depth += code.count("(") - code.count(")")
            if depth <= 0:
                break
        if not lines[end_of_signature].split("#", 1)[0].rstrip().endswith(":"):
            continue  # a declaration (.pxd, or a forward cdef), not a definition
        indent = len(match.group("indent").expandtabs())
        last = end_of_signature
        for j in range(end_of_signature + 1, len(lines)):
            code = lines[j].strip()
            if in_string[j] or not code or code.startswith("#"):
                continue
            if len(lines[j]) - len(lines[j].lstrip()) <= indent:
                break
            last = j
        functions.append((match.group("name"), i + 1, last + 1))
    return functions


def _java_code(text):
    """``text`` with comments, strings and char literals blanked (newlines kept)."""
    def blank(match):
        return re.sub(r"[^\n]", " ", match.group())

    return re.sub(r'/\*.*?\*/|//[^\n]*|"""[\s\S]*?"""|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text,
                  flags=re.S)


_JAVA_NOT_METHODS = {"if", "for", "while", "switch", "catch", "synchronized", "try", "return", "new", "else",
                     "do", "throw", "case", "assert"}
_JAVA_HEADER = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\((?P<args>[^;{}()]*(?:\([^()]*\)[^;{}()]*)*)\)"
                          r"\s*(?:throws\s+[\w.,\s]+)?\{")


def java_methods(text):
    code = _java_code(text)
    methods = []
    for match in _JAVA_HEADER.finditer(code):
        name = match.group("name")
        if name in _JAVA_NOT_METHODS:
            continue  # a control statement
        preceding = code[:match.start("name")].rstrip()
        if re.search(r"\bnew(?:\s+[\w.<>]*)?$", preceding):
            continue  # an anonymous class: `new Foo() {`
        depth, at = 0, match.end() - 1
        for at in range(match.end() - 1, len(code)):
            if code[at] == "{":
                depth += 1
            elif code[at] == "}":
                depth -= 1
                if depth == 0:
                    break
        first = code.count("\n", 0, match.start("name")) + 1
        methods.append((name, first, code.count("\n", 0, at) + 1))
    return methods


def functions_of(rel):
    text = (ROOT / rel).read_text(encoding="utf-8")
    suffix = Path(rel).suffix
    if suffix == ".py":
        return python_functions(text, rel)
    if suffix in (".pyx", ".pxi", ".pxd"):
        return cython_functions(text)
    if suffix == ".java":
        return java_methods(text)
    return []


# -- the finders hold to their rules


def test_the_cython_finder_ends_a_body_at_the_next_line_at_the_def_indentation():
    source = "\n".join([
        "cdef extern from 'a.h':",
        "    int a_f(int x) nogil",
        "cdef int declared(int x)",
        "cdef class Thing:",
        "    cdef int n",
        "    cdef inline int method(self,",
        "                           int x) except -1 nogil:",
        '        """A docstring',
        "with a line at the margin.",
        '        """',
        "# a comment at the margin ends nothing",
        "        return x",
        "",
        "    def other(self):",
        "        pass",
        "cpdef object top(x=f(1)):",
        "    return x",
    ])
    assert cython_functions(source) == [("method", 6, 12), ("other", 14, 15), ("top", 16, 17)]


def test_the_java_finder_counts_methods_and_constructors_by_their_braces():
    source = "\n".join([
        "final class A {",
        "  /** a comment with a brace { */",
        "  A(int x) {",
        "    this.x = x;",
        "  }",
        "  static <T> List<T> take(Map<String, int[]> m, int n) throws IOException {",
        '    String s = "}";',
        "    if (n > 0) {",
        "      Runnable r = new Runnable() { public void run() { } };",
        "    }",
        "    return null;",
        "  }",
        "}",
    ])
    assert java_methods(source) == [("A", 3, 5), ("take", 6, 12), ("run", 9, 9)]


def test_the_python_finder_measures_each_function_with_ast():
    source = "def f():\n    def g():\n        pass\n    return g\n"
    assert sorted(python_functions(source)) == [("f", 1, 4), ("g", 2, 3)]


# -- the limits


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_limits_see_the_sources(folder):
    assert any(rel.startswith(folder + "/") for rel in sources())


def test_no_source_file_is_over_the_line_limit():
    long = []
    for rel in sources():
        if rel in CURRENT_OFFENDERS:
            continue
        n = len((ROOT / rel).read_text(encoding="utf-8").splitlines())
        if n > MAX_FILE_LINES:
            long.append(f"{rel}: {n} lines")
    assert not long, (f"files over {MAX_FILE_LINES} lines (split them, one concept a file):\n" + "\n".join(long))


def test_no_function_is_over_the_line_limit():
    long = []
    for rel in sources():
        for name, first, last in functions_of(rel):
            if f"{rel}::{name}" in CURRENT_OFFENDERS:
                continue
            if last - first + 1 > MAX_FUNCTION_LINES:
                long.append(f"{rel}:{first}: {name}, {last - first + 1} lines")
    assert not long, (f"functions over {MAX_FUNCTION_LINES} lines (a function a phase):\n" + "\n".join(long))
