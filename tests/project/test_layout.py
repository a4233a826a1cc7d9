"""The package's layout rules, checked on the source (nothing is imported).

- No import cycles among modules inside ``a0py/``: no two modules import each
  other, directly or through others, not even inside a function
  (STYLE.md, "Habits of this project").
- A layer imports only the layers below it (DESIGN.md, "Layers"); the
  dataspace knows no IPC.
- No module imports another package's ``_private`` module or name: what a
  package offers others is in its ``__init__`` or a public module. (The
  root package's own modules, the binding ``a0py._core`` among them, enclose
  every package and are theirs to use.)

Every import statement of every module is read: ``.py`` files with ``ast``
(module-level, function-level, conditional and relative imports alike), and
the import statements of compiled ``.pyx`` modules together with the files
they ``include``. Importing ``a0py.x.y`` is counted as an edge to ``a0py.x.y``
only, not to its parent packages: every package's ``__init__`` imports its own
submodules, so counting the implicit parent import would make each package a
cycle and hide the real ones.
"""

import ast
import functools
import itertools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "a0py"

# DESIGN.md's table of layers, bottom up, as data: (layer, module names). A
# name stands for the module and everything below it (the root package ``a0py``
# for itself only, so a new top-level module must be given a layer here); a
# module belongs to the layer of its longest match. A layer may import its own
# modules and those of the layers listed before it.
LAYERS = [
    # The binding: the compiled core and the exceptions it raises.
    ("binding", ["a0py.errors", "a0py._core"]),
    # The package's public face re-exports the binding and the protocols
    # (``a0py.Arena``, ``a0py.Publisher``), so it sits with the protocols.
    ("protocols", ["a0py.proto", "a0py"]),
    # The compiled skeleton index is the dataspace's, wherever it is built.
    ("dataspace", ["a0py.dataspace", "a0py._index"]),
    ("broker", ["a0py.broker"]),
    ("actors", ["a0py.actor"]),
    ("recording", ["a0py.recording"]),
    ("spark", ["a0py.spark"]),
    ("view", ["a0py.view"]),
    ("bridge", ["a0py.bridge"]),
    ("ros2", ["a0py.ros2"]),
    ("cli", ["a0py.cli", "a0py.__main__"]),
]

# "The dataspace knows no IPC": of the layers below it, it may import only
# these modules (the base exception class, which carries no IPC).
IPC_FREE = {"dataspace": {"a0py.errors"}}

_PYX_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+c?import[ \t]+(?:\([^)]*\)|[^\n]*)|c?import[ \t]+[^\n]*)",
    re.MULTILINE,
)
_PYX_INCLUDE = re.compile(r"""^[ \t]*include[ \t]+["']([^"']+)["']""", re.MULTILINE)


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def find_modules():
    """{module name: source path} for every module in a0py/: .py, .pyx, and
    .pxd files that have no .pyx (declarations of the C core)."""
    modules = {}
    for suffix in (".pxd", ".py", ".pyx"):  # a .pyx replaces its own .pxd
        for path in sorted(PACKAGE.rglob("*" + suffix)):
            if "__pycache__" not in path.parts:
                modules[module_name(path)] = path
    return modules


def import_statements(path, seen=None):
    """The ``ast`` nodes of every import statement in a module's source.

    For a ``.pyx`` file, its import lines (``cimport`` read as ``import``) and
    those of the files it includes, recursively.
    """
    text = path.read_text()
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if path.suffix == ".py":
        nodes = [n for n in ast.walk(ast.parse(text, str(path))) if isinstance(n, ast.Import | ast.ImportFrom)]
    else:
        seen = (seen or set()) | {path}
        nodes = []
        for match in _PYX_IMPORT.finditer(text):
            statement = re.sub(r"\bcimport\b", "import", match.group(0).strip())
            for node in ast.parse(statement).body:
                node.lineno = text.count("\n", 0, match.start()) + 1
                nodes.append(node)
        for match in _PYX_INCLUDE.finditer(text):
            included = (path.parent / match.group(1)).resolve()
            if included not in seen:
                nodes += import_statements(included, seen)
    for node in nodes:
        if not hasattr(node, "where"):
            node.where = f"{where}:{node.lineno}"
    return nodes


def resolve(node, importer, modules):
    """The a0py modules an import statement names, and the a0py names it
    could not resolve to a module (a broken import would drop an edge)."""
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        base = node.module
        if node.level:
            package = importer.split(".")
            if modules[importer].stem != "__init__":
                package.pop()  # a plain module's package is its parent
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        # ``from base import name``: the submodule ``base.name`` if there is
        # one, else an attribute of the module ``base``.
        candidates = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
        ]
    ours = {c for c in candidates if c == "a0py" or c.startswith("a0py.")}
    return sorted(ours & modules.keys()), sorted(ours - modules.keys())


@functools.cache  # one read of the tree for all the tests below
def import_graph():
    """{importer: {imported: "file:line" of its first import}} over a0py."""
    modules = find_modules()
    graph, unresolved = {}, []
    for name, path in modules.items():
        if path.suffix == ".pxd":
            continue
        edges = graph.setdefault(name, {})
        for node in import_statements(path):
            targets, missing = resolve(node, name, modules)
            for target in targets:
                # Cimporting C declarations (a .pxd alone) runs no Python code.
                if target != name and modules[target].suffix != ".pxd":
                    edges.setdefault(target, node.where)
            unresolved += [f"{node.where}: {name} imports {m}" for m in missing]
    return graph, unresolved


def strongly_connected_components(graph):
    """Tarjan's algorithm, iterative; components of more than one module."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def elementary_cycles(graph, limit=100):
    """Every elementary cycle (each once, starting at its smallest module),
    searched inside each strongly connected component; at most ``limit``."""
    cycles = []
    for component in strongly_connected_components(graph):
        order = sorted(component)
        for i, start in enumerate(order):
            allowed = set(order[i:])
            path = [start]
            work = [iter(sorted(t for t in graph[start] if t in allowed))]
            while work and len(cycles) < limit:
                for nxt in work[-1]:
                    if nxt == start:
                        cycles.append([*path, start])
                    elif nxt not in path:
                        path.append(nxt)
                        work.append(iter(sorted(t for t in graph[nxt] if t in allowed)))
                        break
                else:
                    work.pop()
                    path.pop()
    return cycles


def describe(cycle, graph):
    steps = [f"{a} ({graph[a][b]}) -> " for a, b in itertools.pairwise(cycle)]
    return "".join(steps) + cycle[-1]


def layer_of(module):
    """(rank, layer) of a module (see LAYERS), or None when it has none."""
    best = None
    for rank, (layer, names) in enumerate(LAYERS):
        for name in names:
            below = name != "a0py" and module.startswith(name + ".")
            if (module == name or below) and (best is None or len(name) > best[0]):
                best = (len(name), rank, layer)
    return None if best is None else best[1:]


def layer_breach(importer, imported):
    """Why ``importer`` may not import ``imported`` under the layer rule, or None."""
    rank, layer = layer_of(importer)
    imported_rank, imported_layer = layer_of(imported)
    if imported_rank > rank:
        return f"{importer} ({layer}) imports {imported} ({imported_layer}), a layer above it"
    if layer in IPC_FREE and imported_rank < rank and imported not in IPC_FREE[layer]:
        return f"{importer} ({layer}, knows no IPC) imports {imported} ({imported_layer})"
    return None


def top_package(module):
    """The package of a module for the privacy rule: ``a0py.X`` when X is a
    subpackage, else the root ``a0py``."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "a0py"


def private_breach(importer, imported, name=None):
    """Why ``importer`` may not import module ``imported`` (or its attribute
    ``name``) under the privacy rule, or None."""
    own, theirs = top_package(importer), top_package(imported)
    if theirs in (own, "a0py"):
        return None
    inside = imported[len(theirs) + 1:].split(".") if imported != theirs else []
    private = [p for p in [*inside, name or ""] if p.startswith("_") and not p.startswith("__")]
    if private:
        what = imported + (f".{name}" if name else "")
        return f"{importer} imports {what}, a private name of package {theirs}"
    return None


@functools.cache
def private_imports():
    """Every import of another package's private module or name in a0py."""
    modules = find_modules()
    breaches = []
    for importer, path in modules.items():
        if path.suffix == ".pxd":
            continue
        for node in import_statements(path):
            targets, _ = resolve(node, importer, modules)
            for target in targets:
                if modules[target].suffix != ".pxd" and (why := private_breach(importer, target)):
                    breaches.append(f"{node.where}: {why}")
            if isinstance(node, ast.ImportFrom) and len(targets) == 1 and not private_breach(importer, targets[0]):
                for alias in node.names:
                    if targets[0].endswith("." + alias.name):
                        continue  # a submodule, checked above
                    if why := private_breach(importer, targets[0], alias.name):
                        breaches.append(f"{node.where}: {why}")
    return sorted(set(breaches))


# -- the checks on the checker: a graph search that finds nothing proves nothing


def test_cycle_search_finds_every_cycle_of_a_known_graph():
    graph = {
        "a": {"b": "a.py:1"},
        "b": {"c": "b.py:2", "a": "b.py:3"},
        "c": {"a": "c.py:4"},
        "d": {"e": "d.py:5"},
        "e": {},
        "f": {"g": "f.py:6"},
        "g": {"f": "g.py:7"},
    }
    assert sorted(map(tuple, elementary_cycles(graph))) == [
        ("a", "b", "a"),
        ("a", "b", "c", "a"),
        ("f", "g", "f"),
    ]
    assert describe(["f", "g", "f"], graph) == "f (f.py:6) -> g (g.py:7) -> f"


def test_reader_sees_function_level_relative_and_pyx_imports(tmp_path):
    py = tmp_path / "m.py"
    py.write_text("def f():\n    from .gather import x\n    import a0py.errors\n")
    assert [type(n).__name__ for n in import_statements(py)] == ["ImportFrom", "Import"]
    pyx = tmp_path / "m.pyx"
    (tmp_path / "inc.py").write_text("from a0py.dataspace._codec import MAX_DEPTH\n")
    pyx.write_text('from ._a0 cimport *\nfrom .errors import (\n    A,\n    B,\n)\ninclude "inc.py"\n')
    nodes = import_statements(pyx)
    assert [(n.module, n.level) for n in nodes] == [("_a0", 1), ("errors", 1), ("a0py.dataspace._codec", 0)]
    assert [a.name for a in nodes[1].names] == ["A", "B"]
    assert [n.where for n in nodes] == [f"{pyx}:1", f"{pyx}:2", f"{tmp_path / 'inc.py'}:1"]


def test_imports_resolve_to_modules_not_parent_packages():
    modules = {"a0py": PACKAGE / "__init__.py", "a0py.actor": PACKAGE / "actor" / "__init__.py",
               "a0py.actor.arena": PACKAGE / "actor" / "arena.py", "a0py.errors": PACKAGE / "errors.py",
               "a0py.actor.gather": PACKAGE / "actor" / "gather.py", "a0py._core": PACKAGE / "_core.pyx"}

    def targets(source, importer):
        return resolve(ast.parse(source).body[0], importer, modules)

    assert targets("from .gather import x", "a0py.actor.arena") == (["a0py.actor.gather"], [])
    assert targets("from . import gather", "a0py.actor") == (["a0py.actor.gather"], [])
    assert targets("from ..errors import A0Error", "a0py.actor.arena") == (["a0py.errors"], [])
    assert targets("from . import _core", "a0py") == (["a0py._core"], [])
    assert targets("from . import A0Error", "a0py") == (["a0py"], [])
    assert targets("import a0py", "a0py.actor.arena") == (["a0py"], [])
    assert targets("import os, a0py.errors", "a0py.actor.arena") == (["a0py.errors"], [])
    assert targets("from a0py.actor import nothing_here", "a0py") == (["a0py.actor"], [])
    assert targets("from a0py.gone import x", "a0py") == ([], ["a0py.gone"])


# -- the rules on a0py itself


def test_every_internal_import_names_a_module():
    _, unresolved = import_graph()
    assert unresolved == [], "imports of a0py names that are no module:\n" + "\n".join(unresolved)


def test_no_import_cycles_inside_a0py():
    graph, _ = import_graph()
    assert "a0py.errors" in graph and len(graph) > 10  # the walk found the package
    cycles = elementary_cycles(graph)
    for cycle in cycles:
        print("import cycle:", describe(cycle, graph))
    assert not cycles, f"{len(cycles)} import cycle(s) inside a0py/:\n" + "\n".join(
        describe(c, graph) for c in cycles
    )


def test_every_module_has_a_layer():
    graph, _ = import_graph()
    orphans = sorted(m for m in graph if layer_of(m) is None)
    assert not orphans, f"modules in no layer of DESIGN.md: {orphans}; add them to LAYERS in {__file__}"


def test_layers_import_only_layers_below_them():
    graph, _ = import_graph()
    breaches = [
        f"{where}: {why}"
        for importer, edges in sorted(graph.items())
        for imported, where in sorted(edges.items())
        if (why := layer_breach(importer, imported))
    ]
    assert not breaches, "layer rule of DESIGN.md broken:\n" + "\n".join(breaches)


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("a0py.actor.arena", "a0py._core", True),
        ("a0py.actor.arena", "a0py", True),
        ("a0py.actor.arena", "a0py.proto.topic", True),
        ("a0py.proto.topic", "a0py.actor.arena", False),
        ("a0py.proto.topic", "a0py.dataspace", False),
        ("a0py._core", "a0py.proto.topic", False),
        ("a0py._core", "a0py.dataspace", False),
        ("a0py.errors", "a0py", False),
        ("a0py.dataspace._codec", "a0py.errors", True),
        ("a0py.dataspace._codec", "a0py._core", False),
        ("a0py.dataspace._codec", "a0py", False),
        ("a0py.dataspace._codec", "a0py.proto.pubsub", False),
        ("a0py.dataspace._index", "a0py.dataspace._values", True),
        ("a0py.broker.server", "a0py.dataspace", True),
        ("a0py.broker.server", "a0py.actor", False),
        ("a0py.spark.reader", "a0py.view", False),
        ("a0py.spark.planning", "a0py.recording.reader", True),
        ("a0py.view._recording", "a0py.recording.reader", True),
        ("a0py.recording.recorder", "a0py.proto.topic", True),
        ("a0py.recording.reader", "a0py.spark.planning", False),
        ("a0py.recording.reader", "a0py.view", False),
        ("a0py.cli.arenas", "a0py.actor", True),
        ("a0py.__main__", "a0py.cli", True),
    ],
)
def test_layer_table_reads_as_design_says(importer, imported, allowed):
    assert (layer_breach(importer, imported) is None) == allowed


def test_a_new_top_level_module_has_no_layer_until_placed():
    assert layer_of("a0py.something_new") is None
    assert layer_of("a0py") == (1, "protocols")


@pytest.mark.parametrize(
    ("importer", "imported", "name", "allowed"),
    [
        ("a0py.view._recording", "a0py.recording.reader", None, True),
        ("a0py.view._recording", "a0py.recording.reader", "read_layout", True),
        ("a0py.spark.batches", "a0py.recording._bulk", None, False),
        ("a0py.spark.batches", "a0py.recording.packets", "_private_helper", False),
        ("a0py.view._recording", "a0py.spark.planning", "_chunk_meta", False),
        ("a0py.recording.writer", "a0py.recording._bulk", None, True),
        ("a0py.recording.writer", "a0py.recording.format", "_own", True),
        ("a0py.spark.arenas", "a0py._core", None, True),
        ("a0py.recording.reader", "a0py.errors", "ArenaNotFoundError", True),
        ("a0py.cli.recordings", "a0py.recording.recorder", "Recorder", True),
    ],
)
def test_privacy_rule_reads_as_design_says(importer, imported, name, allowed):
    assert (private_breach(importer, imported, name) is None) == allowed


def test_no_module_imports_another_packages_private_name():
    breaches = private_imports()
    assert not breaches, "private names imported across packages:\n" + "\n".join(breaches)


def test_the_privacy_check_sees_a_private_import(tmp_path, monkeypatch):
    pkg = tmp_path / "a0py"
    for sub in ("one", "two"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "one" / "_secret.py").write_text("X = 1\n_Y = 2\n")
    (pkg / "one" / "public.py").write_text("_Z = 3\n")
    (pkg / "two" / "user.py").write_text(
        "from ..one import _secret\nfrom ..one.public import _Z\nfrom a0py.one._secret import X\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    private_imports.cache_clear()
    try:
        found = private_imports()
    finally:
        private_imports.cache_clear()
    assert found == [
        "a0py/two/user.py:1: a0py.two.user imports a0py.one._secret, a private name of package a0py.one",
        "a0py/two/user.py:2: a0py.two.user imports a0py.one.public._Z, a private name of package a0py.one",
        "a0py/two/user.py:3: a0py.two.user imports a0py.one._secret, a private name of package a0py.one",
    ]
