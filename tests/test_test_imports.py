"""Tests share helpers through tests/support/ and fixtures through conftest.py, never by importing one
another: importing a test module for one helper loads the whole module, and ties together two files that
change for different reasons."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path, root: Path = TESTS) -> list[str]:
    """Every module (and `module.name`) the file imports, relative imports resolved against the tests
    package: `from .x import y` in tests/ gives `tests.x` and `tests.x.y`, `from . import x` gives `tests.x`."""
    package = path.parent.relative_to(root).parts
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(("tests", *package[:len(package) - node.level + 1]))
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]
    return names


def forbidden(module: str) -> bool:
    """Anything of the tests package but tests/support/, or a test module or conftest named bare (tests/ on
    sys.path)."""
    parts = module.split(".")
    if parts[0] == "tests":
        return len(parts) > 1 and parts[1] != "support"
    return parts[0] == "conftest" or parts[0].startswith("test_")


def test_no_test_module_imports_another_test_module_or_conftest():
    offenders = {}
    for path in sorted([*TESTS.glob("*.py"), *TESTS.glob("support/**/*.py")]):  # not data/: repositories
        bad = sorted({name for name in imported_modules(path) if forbidden(name)})
        if bad:
            offenders[str(path.relative_to(TESTS))] = bad
    assert not offenders, f"{len(offenders)} modules import a test module or conftest (use tests/support/): {offenders}"


def test_the_check_sees_relative_absolute_and_bare_imports(tmp_path):
    (tmp_path / "support").mkdir()
    (tmp_path / "test_m.py").write_text("import tests.test_a\nfrom .conftest import git\nfrom . import test_b\n"
                                        "import conftest\nimport pytest\nfrom codeagent.tests import z\n"
                                        "from .support.repos import x\nfrom tests.support import tui\n")
    (tmp_path / "support" / "m.py").write_text("from ..test_c import y\nfrom . import repos\n")

    def found(path):
        return sorted({name for name in imported_modules(path, tmp_path) if forbidden(name)})

    assert found(tmp_path / "test_m.py") == ["conftest", "tests.conftest", "tests.conftest.git", "tests.test_a",
                                             "tests.test_b"]
    assert found(tmp_path / "support" / "m.py") == ["tests.test_c", "tests.test_c.y"]
