"""Each package keeps its exceptions in one module, ``errors.py`` (the core's in
``a0py/errors.py``), so a user finds every error a package raises in one place.
Checked on the source: every class whose name ends in ``Error`` or ``Exception``,
in the packages listed, is defined in that package's ``errors.py``."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "a0py"
PACKAGES = ["actor", "broker", "bridge", "cli", "view"]


def error_classes(path):
    tree = ast.parse(path.read_text(), str(path))
    return [node.name for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name.lstrip("_").endswith(("Error", "Exception"))]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_exceptions_of_a_package_are_in_its_errors_module(package):
    home = PACKAGE / package / "errors.py"
    assert home.exists(), f"a0py/{package} has no errors.py"
    assert error_classes(home), f"a0py/{package}/errors.py defines no exception"
    stray = {str(path.relative_to(PACKAGE.parent)): names
             for path in sorted((PACKAGE / package).rglob("*.py")) if path != home
             for names in [error_classes(path)] if names}
    assert not stray, f"exceptions outside a0py/{package}/errors.py: {stray}"


def test_the_core_error_list_names_every_core_exception_and_a0py_exports_it():
    import a0py
    from a0py import _core, errors

    assert sorted(errors.__all__) == sorted(error_classes(PACKAGE / "errors.py"))
    for name in errors.__all__:
        assert getattr(a0py, name) is getattr(errors, name) is getattr(_core, name), name
        assert name in a0py.__all__, name
