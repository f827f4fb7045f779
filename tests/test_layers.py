"""The house's structure is checked like its behaviour: the import contracts in pyproject.toml
(lint-imports), no import cycle between modules (function-local imports included), ruff, the type
checker (mypy, configured in pyproject.toml's [tool.mypy]), and one import style inside codeagent/."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "codeagent"


def tool(name: str) -> str:
    """A dev tool next to this interpreter (the `dev` extra installs them); missing fails, not skips."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


def test_import_contracts_hold():
    proc = subprocess.run([tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_ruff_is_clean():
    proc = subprocess.run([tool("ruff"), "check", "--no-cache", "codeagent", "tests", "bench"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_passes(tmp_path):
    proc = subprocess.run([tool("mypy"), "--cache-dir", str(tmp_path / "mypy-cache")], cwd=ROOT,
                          capture_output=True, text=True)  # the files to check: [tool.mypy] files
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


def test_the_relative_imports_script_rewrites_a_package(tmp_path):
    package = tmp_path / "codeagent"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from codeagent.sub.a import f\n")
    (package / "sub" / "a.py").write_text(
        "import os\n\nimport codeagent.sub.b as b\nfrom codeagent import patches\nfrom codeagent.other.deep import (\n"
        "    x,\n)\n\n\ndef f():\n    from codeagent.sub import c  # lazy\n\n"
        "    return [os, b, patches, x, c, 'python -m codeagent.sub.a']\n")
    script = [sys.executable, str(ROOT / "scripts" / "relative_imports.py"), str(package)]
    assert subprocess.run([*script, "--check"], capture_output=True).returncode == 1
    subprocess.run(script, check=True, capture_output=True)
    assert (package / "sub" / "__init__.py").read_text() == "from .a import f\n"
    assert (package / "sub" / "a.py").read_text() == (
        "import os\n\nfrom .. import patches\nfrom ..other.deep import (\n    x,\n)\nfrom . import b\n\n\n"
        "def f():\n    from . import c  # lazy\n\n    return [os, b, patches, x, c, 'python -m codeagent.sub.a']\n")
    assert subprocess.run([*script, "--check"], capture_output=True).returncode == 0


def absolute_self_imports(package: Path) -> list[str]:
    """`from codeagent... import` / `import codeagent...` statements inside the package (strings aside)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if any(name == package.name or name.startswith(package.name + ".") for name in names):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def test_imports_inside_the_package_are_relative():
    """One import style (ruff's banned-api cannot say it: it resolves relative imports and flags them too).
    `python scripts/relative_imports.py` rewrites what this finds."""
    assert absolute_self_imports(PACKAGE) == []


def module_graph(package: Path) -> nx.DiGraph:
    """Modules and what they import, function-local imports included (they hide cycles, not break them)."""
    names = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = nx.DiGraph()
    for name, path in names.items():
        graph.add_node(name)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(name, is_package, node):
                while target and target not in names:
                    target = target.rpartition(".")[0]
                inside_own_package = names.get(target, Path()).name == "__init__.py" and name.startswith(target + ".")
                if target and target != name and not inside_own_package:
                    graph.add_edge(name, target)
    return graph


def _targets(module: str, is_package: bool, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        parts = parts[: len(parts) - node.level + (1 if is_package else 0)]
        base = ".".join(parts + ([node.module] if node.module else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def test_no_import_cycle_between_modules():
    cycles = [sorted(group) for group in nx.strongly_connected_components(module_graph(PACKAGE)) if len(group) > 1]
    assert cycles == [], cycles


def test_the_cycle_finder_sees_function_local_imports(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import g\n")
    (package / "b.py").write_text("def g():\n    from .a import f  # hidden in a function\n")
    assert [sorted(group) for group in nx.strongly_connected_components(module_graph(package))
            if len(group) > 1] == [["pkg.a", "pkg.b"]]
